// Compiles the `stepwise` CLI (src/) and a tasks module to plain JavaScript for a run, file by file with
// TypeScript's transpiler (no type check: `make typecheck` does that). A process started from it is
// ready in well under a second instead of the seconds tsx takes to compile at every start, which
// matters when a worker is killed and restarted every two seconds.
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { ROOT } from './processes';

const OPTIONS: ts.CompilerOptions = { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true };

function transpile(file: string, out: string, rewrite: (code: string) => string = (c) => c): void {
  const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), { compilerOptions: OPTIONS, fileName: file });
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, rewrite(outputText));
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? walk(full) : [full];
  });
}

/** A compiled copy of the CLI inside the repository (so node_modules resolve); returns its bin and the compiled tasks. */
export interface CompiledRun {
  dir: string;
  bin: string;
  /** The compiled counterpart of each tasks module asked for. */
  tasks: Record<string, string>;
  remove(): void;
}

export function compileForRun(name: string, tasksFiles: string[]): CompiledRun {
  const dir = path.join(ROOT, '.tmp', name);
  rmSync(dir, { recursive: true, force: true });
  for (const file of walk(path.join(ROOT, 'src'))) {
    if (!file.endsWith('.ts') || file.endsWith('.d.ts')) continue;
    transpile(file, path.join(dir, path.relative(ROOT, file)).replace(/\.ts$/, '.js'));
  }
  // src/api/spec.ts reads the contract relative to its own folder; the CLI and the worker's presence
  // read the version from package.json, two folders up from theirs.
  copyFileSync(path.join(ROOT, 'openapi.yaml'), path.join(dir, 'openapi.yaml'));
  copyFileSync(path.join(ROOT, 'package.json'), path.join(dir, 'package.json'));
  const tasks: Record<string, string> = {};
  for (const file of tasksFiles) {
    const out = path.join(dir, path.relative(ROOT, file)).replace(/\.ts$/, '.js');
    const index = path.relative(path.dirname(out), path.join(dir, 'src', 'index.js'));
    // A user's tasks import 'stepwise-workflows'; here that is the compiled copy next to them.
    transpile(file, out, (code) => code.replace(/require\("stepwise-workflows"\)/g, `require(${JSON.stringify(index.startsWith('.') ? index : `./${index}`)})`));
    tasks[file] = out;
  }
  const bin = path.join(dir, 'stepwise.js');
  writeFileSync(bin, "'use strict';\nrequire('./src/cli.js').main(process.argv).catch((err) => { console.error(`stepwise: ${err && err.message}`); process.exit(1); });\n");
  return { dir, bin, tasks, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
