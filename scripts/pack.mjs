// `make pack`: the two installable packages as npm tarballs, `stepwise` (server, SDK and command) and
// `stepwise-workflows-client` (packages/client), made by `npm pack` (whose prepack builds each).
//
//   node scripts/pack.mjs [--out DIR]     (default .packs/)  prints the tarballs' paths, one a line
//
// It packs a copy of the tree in a temporary folder (node_modules linked, not copied), so the build
// output never lands in this one: `make run` and the tests keep running the source, and a `make test`
// that packs (test/packaging) does not race the other tests over dist/.
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PACKAGES = ['.', 'packages/client'];
/** Never copied: installs, build output, local data, results and VCS metadata. */
const SKIP = new Set(['node_modules', '.git', 'dist', '.stepwise', '.tmp', '.packs', '.bench-dist', 'bench-results', 'chaos-results', 'artifacts', 'coverage']);

const args = process.argv.slice(2);
const outIndex = args.indexOf('--out');
const out = path.resolve(outIndex >= 0 ? args[outIndex + 1] : path.join(root, '.packs'));

/** `npm pack`'s file name for a package: `@scope/name` becomes `scope-name-VERSION.tgz`. */
function tarballName(dir) {
  const { name, version } = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
  return `${name.replace(/^@/, '').replace('/', '-')}-${version}.tgz`;
}

const staging = mkdtempSync(path.join(os.tmpdir(), 'stepwise-pack-'));
try {
  cpSync(root, staging, {
    recursive: true,
    filter: (src) => {
      const name = path.basename(src);
      return !SKIP.has(name) && !name.endsWith('.tgz');
    },
  });
  symlinkSync(path.join(root, 'node_modules'), path.join(staging, 'node_modules'), 'dir');
  mkdirSync(out, { recursive: true });
  const run = promisify(execFile);
  const tarballs = await Promise.all(
    PACKAGES.map(async (pkg) => {
      const dir = path.join(staging, pkg);
      try {
        await run('npm', ['pack', '--pack-destination', out, '--loglevel=error'], { cwd: dir, maxBuffer: 64 * 1024 * 1024 });
      } catch (err) {
        throw new Error(`npm pack in ${pkg} failed:\n${err.stdout ?? ''}${err.stderr ?? err.message}`);
      }
      return path.join(out, tarballName(dir));
    }),
  );
  for (const tarball of tarballs) console.log(tarball);
} finally {
  rmSync(staging, { recursive: true, force: true });
}
