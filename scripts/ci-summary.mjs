// Prints jest's JSON result as the plain closing line CI reads: "label: N passed, N failed".
import { readFileSync } from 'node:fs';
const [label, file] = process.argv.slice(2);
const r = JSON.parse(readFileSync(file, 'utf8'));
console.log(`${label}: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests} skipped`);
process.exit(r.success && r.numTotalTests > 0 ? 0 : 1);
