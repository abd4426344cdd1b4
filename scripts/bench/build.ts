// The build `make bench` measures: compiled JavaScript, as a deployment runs it, in `.bench-dist/`
// (gitignored). Never in dist/: bin/stepwise.js runs dist/ when it is there, so a build left by the
// benchmark would change what `make run` runs. One level under the repository, like dist/, because the
// compiled code finds openapi.yaml, src/ui and examples/ two levels up from its own folders.
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';

export const ROOT = path.join(__dirname, '..', '..');
export const BENCH_DIST = path.join(ROOT, '.bench-dist');

/** Compiles src/ into .bench-dist/ (from scratch, so no file of an older build survives). */
export function buildForBench(): string {
  rmSync(BENCH_DIST, { recursive: true, force: true });
  execFileSync(path.join(ROOT, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json', '--outDir', BENCH_DIST], { cwd: ROOT, stdio: 'inherit' });
  return BENCH_DIST;
}

/** Arguments for `node` that run `stepwise <args>` from the benchmark's build. */
export function stepwiseArgs(dist: string, args: string[]): string[] {
  const cli = JSON.stringify(path.join(dist, 'cli.js'));
  return ['-e', `require(${cli}).main(['node', 'stepwise', ...process.argv.slice(1)]).catch((e) => { console.error(e); process.exit(1); })`, ...args];
}
