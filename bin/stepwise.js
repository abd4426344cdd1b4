#!/usr/bin/env node
'use strict';
// The `stepwise` command. Runs the compiled CLI when dist/ exists, else the TypeScript source through
// tsx; in that case `import ... from 'stepwise'` in task modules resolves to the same source files.
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const dist = path.join(root, 'dist', 'cli.js');
let cli;
if (fs.existsSync(dist) && process.env.STEPWISE_FROM_SOURCE !== '1') {
  cli = require(dist);
} else {
  require('tsx/cjs');
  const Module = require('node:module');
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
