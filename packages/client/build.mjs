// Builds stepwise-workflows-client from the repository's own sources, src/client/*.ts and generated/openapi.d.ts
// (the same code the `stepwise-workflows/client` export of the server package runs):
//
//   dist/esm/index.js    ES module (the `import` condition: Node.js, Deno, Bun, browsers, bundlers)
//   dist/cjs/index.js    CommonJS (the `require` condition)
//   dist/{esm,cjs}/*.d.ts  the types, beside each (a package.json in each folder gives its format)
//
// The JavaScript is one esbuild bundle per format with openapi-fetch left as an import. The build fails
// when the client reaches anything but src/client (server code) or imports anything but openapi-fetch
// (node: modules included), and the declarations are emitted with browser globals only (tsconfig.json),
// so nothing Node-only gets in. Run by `npm pack` (prepack) and `make pack`; needs the repository's
// node_modules (esbuild, typescript).
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const require = createRequire(import.meta.url);
const esbuild = require('esbuild');
const ts = require('typescript');

const SOURCE = path.join(root, 'src', 'client');
const ENTRY = path.join(SOURCE, 'index.ts');
const OPENAPI_TYPES = path.join(root, 'generated', 'openapi.d.ts');
const DIST = path.join(here, 'dist');
/** The only package the client may import at run time. */
const RUNTIME_DEPENDENCY = 'openapi-fetch';

function fail(message) {
  console.error(`stepwise-workflows-client build: ${message}`);
  process.exit(1);
}

// Released together with the server package: same version, same openapi-fetch.
const own = JSON.parse(readFileSync(path.join(here, 'package.json'), 'utf8'));
const server = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
if (own.version !== server.version) fail(`version ${own.version} differs from the stepwise package's ${server.version}`);
if (JSON.stringify(Object.keys(own.dependencies ?? {})) !== JSON.stringify([RUNTIME_DEPENDENCY])) fail(`dependencies must be ${RUNTIME_DEPENDENCY} only`);
if (own.dependencies[RUNTIME_DEPENDENCY] !== server.dependencies[RUNTIME_DEPENDENCY]) {
  fail(`${RUNTIME_DEPENDENCY} ${own.dependencies[RUNTIME_DEPENDENCY]} differs from the stepwise package's ${server.dependencies[RUNTIME_DEPENDENCY]}`);
}

rmSync(DIST, { recursive: true, force: true });

// ---- JavaScript: one bundle per format.
for (const [dir, format, type] of [
  ['esm', 'esm', 'module'],
  ['cjs', 'cjs', 'commonjs'],
]) {
  const out = path.join(DIST, dir);
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [ENTRY],
    outfile: path.join(out, 'index.js'),
    bundle: true,
    format,
    platform: 'neutral',
    target: 'es2022',
    external: [RUNTIME_DEPENDENCY],
    metafile: true,
    legalComments: 'none',
    logLevel: 'silent',
  });
  const inputs = Object.keys(result.metafile.inputs).map((p) => path.resolve(root, p));
  const outside = inputs.filter((p) => path.dirname(p) !== SOURCE);
  if (outside.length > 0) fail(`the client reaches beyond src/client: ${outside.map((p) => path.relative(root, p)).join(', ')}`);
  const imports = Object.values(result.metafile.outputs).flatMap((o) => o.imports.map((i) => i.path));
  const foreign = imports.filter((p) => p !== RUNTIME_DEPENDENCY);
  if (foreign.length > 0) fail(`the client imports ${foreign.join(', ')}: only ${RUNTIME_DEPENDENCY} is allowed`);
  writeFileSync(path.join(out, 'package.json'), JSON.stringify({ type }) + '\n');
}

// ---- Types: tsc's declarations, with every relative specifier made explicit ('./errors.js'), as ES
// modules under node16/nodenext resolution need; the same files serve the CommonJS build.
const configFile = path.join(here, 'tsconfig.json');
const parsed = ts.getParsedCommandLineOfConfigFile(configFile, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => fail(ts.flattenDiagnosticMessageText(d.messageText, '\n')) });
if (parsed.errors.length > 0) fail(ts.formatDiagnostics(parsed.errors, formatHost()));
const program = ts.createProgram(parsed.fileNames, parsed.options);
const declarations = new Map();
const emitted = program.emit(undefined, (file, text) => declarations.set(path.resolve(file), text));
const diagnostics = [...ts.getPreEmitDiagnostics(program), ...emitted.diagnostics];
if (diagnostics.length > 0) fail(`the client does not type-check with browser globals only:\n${ts.formatDiagnostics(diagnostics, formatHost())}`);

const typesDir = path.resolve(here, parsed.options.outDir);
/** The file name in dist/{esm,cjs} of a module the declarations import, by its path without extension. */
function targetOf(absolute) {
  if (absolute === OPENAPI_TYPES.replace(/\.d\.ts$/, '')) return 'openapi.js';
  if (path.dirname(absolute) === SOURCE) return `${path.basename(absolute)}.js`;
  fail(`the client's types reach beyond src/client: ${path.relative(root, absolute)}`);
}
const files = new Map([['openapi.d.ts', readFileSync(OPENAPI_TYPES, 'utf8')]]);
for (const [file, text] of declarations) {
  const name = path.relative(typesDir, file);
  const sourceDir = path.dirname(path.join(SOURCE, name));
  const rewritten = text.replace(/(from\s+|import\()(['"])(\.{1,2}\/[^'"]+)\2/g, (_, lead, quote, spec) => {
    return `${lead}${quote}./${targetOf(path.resolve(sourceDir, spec.replace(/\.js$/, '')))}${quote}`;
  });
  files.set(name, rewritten);
}
for (const dir of ['esm', 'cjs']) {
  for (const [name, text] of files) writeFileSync(path.join(DIST, dir, name), text);
}

function formatHost() {
  return { getCanonicalFileName: (f) => f, getCurrentDirectory: () => root, getNewLine: () => '\n' };
}

console.log(`stepwise-workflows-client ${own.version}: ${path.relative(root, DIST)}/{esm,cjs} (${[...files.keys()].join(', ')})`);
