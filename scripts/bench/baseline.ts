// The other build of `make bench --baseline REV`: the revision's files (git archive) in
// .bench-baseline/<sha>/ (gitignored), compiled with tsc into its own .bench-dist/, as the current
// build is. Kept per commit, so a second run against the same revision starts at once. The
// scenarios drive it as a black box (its compiled CLI and SDK, through the current adapter), so an
// old revision needs none of today's scripts/bench/.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from './build';

export const BASELINE_ROOT = path.join(ROOT, '.bench-baseline');
const BUILT_STAMP = '.bench-built';
/** The compiled modules scripts/bench/stepwise-adapter.mjs loads from a build. */
const ADAPTER_NEEDS = ['index.js', 'cli.js', 'logger.js', 'store/db.js', 'store/migrate.js', 'store/tasks.js', 'engine/registry.js'];

export interface BaselineBuild {
  rev: string;
  sha: string;
  short: string;
  /** The revision's files: STEPWISE_ROOT for the adapter. */
  root: string;
  /** Its compiled build: STEPWISE_DIST for the adapter. */
  dist: string;
}

/** The commit a revision names (a sha, a branch, HEAD~3), or an error that says which revision. */
export function resolveRevision(rev: string): string {
  try {
    return execFileSync('git', ['rev-parse', '--verify', '--quiet', `${rev}^{commit}`], { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    throw new Error(`--baseline: "${rev}" names no commit in this repository`);
  }
}

type LockPackages = Record<string, { version?: string; integrity?: string }>;

function lockPackages(file: string): LockPackages | undefined {
  if (!existsSync(file)) return undefined;
  return (JSON.parse(readFileSync(file, 'utf8')) as { packages?: LockPackages }).packages;
}

/**
 * Whether the current node_modules holds every package the revision's lock file installs, at the
 * same place and version: then the revision runs on it, found by Node's upward module lookup from
 * .bench-baseline/<sha>/ (no node_modules of its own). The current lock may hold more packages.
 */
function currentModulesServe(root: string): boolean {
  const theirs = lockPackages(path.join(root, 'package-lock.json'));
  const ours = lockPackages(path.join(ROOT, 'package-lock.json'));
  if (!theirs || !ours) return false;
  return Object.entries(theirs).every(([where, p]) => where === '' || (ours[where]?.version === p.version && ours[where]?.integrity === p.integrity));
}

/** Builds the revision aside, or finds the build an earlier run left; `say` reports each step. */
export function buildBaseline(rev: string, say: (line: string) => void): BaselineBuild {
  const sha = resolveRevision(rev);
  const root = path.join(BASELINE_ROOT, sha);
  const build: BaselineBuild = { rev, sha, short: sha.slice(0, 7), root, dist: path.join(root, '.bench-dist') };
  if (existsSync(path.join(root, BUILT_STAMP))) {
    say(`baseline ${build.short}: reusing the build in ${path.relative(ROOT, root)}/`);
    return build;
  }
  rmSync(root, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
  say(`baseline ${build.short}: extracting ${rev} into ${path.relative(ROOT, root)}/ ...`);
  execFileSync('sh', ['-c', 'git archive --format=tar "$1" | tar -x -C "$2"', 'sh', sha, root], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  let tsc = path.join(ROOT, 'node_modules', '.bin', 'tsc');
  if (currentModulesServe(root)) {
    say(`baseline ${build.short}: its package-lock.json is covered by the current one; using the current node_modules`);
  } else {
    say(`baseline ${build.short}: its dependencies differ from the current ones; npm ci in ${path.relative(ROOT, root)}/ (about a minute) ...`);
    execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
    tsc = path.join(root, 'node_modules', '.bin', 'tsc');
  }
  if (!existsSync(path.join(root, 'tsconfig.build.json'))) throw new Error(`--baseline ${rev}: ${sha} has no tsconfig.build.json to compile src/ with`);
  say(`baseline ${build.short}: compiling with tsc ...`);
  execFileSync(tsc, ['-p', 'tsconfig.build.json', '--outDir', build.dist], { cwd: root, stdio: 'inherit' });
  const missing = ADAPTER_NEEDS.filter((f) => !existsSync(path.join(build.dist, f)));
  if (missing.length > 0) throw new Error(`--baseline ${rev}: its build lacks what scripts/bench/stepwise-adapter.mjs loads: ${missing.join(', ')}`);
  writeFileSync(path.join(root, BUILT_STAMP), `${new Date().toISOString()}\n`);
  return build;
}
