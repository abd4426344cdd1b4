#!/usr/bin/env node
'use strict';
// The `stepwise` command. Runs the compiled CLI when dist/ exists, else the TypeScript source through
// tsx. From source, `import ... from 'stepwise'` in task modules must reach the same source files
// (the package's `stepwise-source` export condition), for CommonJS and ES modules alike.
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const dist = path.join(root, 'dist', 'cli.js');
let cli;
if (fs.existsSync(dist) && process.env.STEPWISE_FROM_SOURCE !== '1') {
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
  const own = { stepwise: path.join(root, 'src', 'index.ts'), 'stepwise/client': path.join(root, 'src', 'client', 'index.ts') };
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
