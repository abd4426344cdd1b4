// Prints jest's JSON results as the plain closing line CI reads: "label: N passed, N failed". Several
// files (the suite's and the cost budget's, Makefile `test`) add up; a missing one fails.
import { readFileSync } from 'node:fs';
const [label, ...files] = process.argv.slice(2);
const results = files.map((file) => JSON.parse(readFileSync(file, 'utf8')));
const sum = (key) => results.reduce((n, r) => n + r[key], 0);
console.log(`${label}: ${sum('numPassedTests')} passed, ${sum('numFailedTests')} failed, ${sum('numPendingTests')} skipped`);
process.exit(results.length > 0 && results.every((r) => r.success) && sum('numTotalTests') > 0 ? 0 : 1);
