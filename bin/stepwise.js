#!/usr/bin/env node
'use strict';
// The `stepwise` command. Runs the compiled CLI when dist/ exists (`make build`), else the TypeScript
// source through tsx. A dist/ older than the source beside it is not run: it would silently run code
// that is no longer there (the source runs, with a note). From source, `import ... from 'stepwise-workflows'` in
// task modules must reach the same source files (the package's `stepwise-source` export condition),
// for CommonJS and ES modules alike.
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const dist = path.join(root, 'dist', 'cli.js');

/** The newest modification time of the compiled source files under `dir` (src/ui is bundled at run time, never compiled). */
function newestSource(dir) {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (p !== path.join(root, 'src', 'ui')) newest = Math.max(newest, newestSource(p));
    } else if (/\.tsx?$/.test(entry.name)) newest = Math.max(newest, fs.statSync(p).mtimeMs);
  }
  return newest;
}

function distIsCurrent() {
  if (!fs.existsSync(dist)) return false;
  if (!fs.existsSync(path.join(root, 'src', 'cli.ts'))) return true; // an installed package: dist/ is all there is
  if (newestSource(path.join(root, 'src')) <= fs.statSync(dist).mtimeMs) return true;
  process.stderr.write('stepwise: dist/ is older than src/: running the source (`make build` refreshes dist/)\n');
  return false;
}

let cli;
if (process.env.STEPWISE_FROM_SOURCE !== '1' && distIsCurrent()) {
  cli = require(dist);
} else {
  const Module = require('node:module');
  Module.register(
    'data:text/javascript,' +
      encodeURIComponent(
        "export async function resolve(s, c, next) { return next(s, { ...c, conditions: [...c.conditions, 'stepwise-source'] }); }",
      ),
  );
  require('tsx/cjs');
  require('tsx/esm');
  const own = { 'stepwise-workflows': path.join(root, 'src', 'index.ts'), 'stepwise-workflows/client': path.join(root, 'src', 'client', 'index.ts') };
  const resolve = Module._resolveFilename;
  Module._resolveFilename = function (request, ...rest) {
    return resolve.call(this, own[request] ?? request, ...rest);
  };
  cli = require(path.join(root, 'src', 'cli.ts'));
}
cli.main(process.argv).catch((err) => {
  console.error(err && err.message ? `stepwise: ${err.message}` : err);
  process.exit(1);
});
