// The two npm packages as a user gets them. `npm pack` makes both (scripts/pack.mjs, `make pack`, from
// a copy of the tree so that no dist/ lands here), and a new project in a temporary folder installs
// only those tarballs (and their dependencies from the registry), following the README's "Use it in
// your project": the same setup commands, and its tasks.ts, client.ts and client.cjs, taken from the
// README itself. Then `npx stepwise dev --tasks ./tasks.ts` serves the tasks (embedded PostgreSQL in
// the project's .stepwise/, as for a newcomer), and the ES module client.ts (`npx tsx`) and the
// CommonJS client.cjs (`node`) schedule a task through stepwise-workflows-client and wait for its output. Plain
// Node.js imports both packages from ES modules and CommonJS, and tsc checks the project's files under
// node16 and bundler resolution against the shipped types.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { waitUntil } from '../helpers/wait-until';

jest.setTimeout(360_000);

const ROOT = path.join(__dirname, '..', '..');
const TSC = path.join(ROOT, 'node_modules', '.bin', 'tsc');
const README = readFileSync(path.join(ROOT, 'README.md'), 'utf8');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end; throws with its output unless it exits 0 (or `allowFailure`). */
function run(file: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; allowFailure?: boolean }): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { cwd: options.cwd, env: options.env ?? userEnv(), timeout: options.timeoutMs ?? 240_000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      if (code !== 0 && !options.allowFailure) reject(new Error(`${file} ${args.join(' ')} (in ${options.cwd}) exited ${code}:\n${stdout}\n${stderr}`));
      else resolve({ code, stdout, stderr });
    });
  });
}

/** The environment of a user's shell: none of this suite's database or operator settings. */
function userEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, SCARF_ANALYTICS: 'false', npm_config_update_notifier: 'false', npm_config_fund: 'false', ...extra };
  for (const name of ['DATABASE_URL', 'STEPWISE_URL', 'STEPWISE_TOKEN', 'STEPWISE_FROM_SOURCE', 'NODE_OPTIONS', 'STEPWISE_TEST_ADMIN_URL']) delete env[name];
  return { ...env, ...extra };
}

/** The README's "Use it in your project" section. */
const SECTION = (() => {
  const start = README.indexOf('\n## Use it in your project\n');
  const end = README.indexOf('\n## ', start + 1);
  if (start < 0 || end < 0) throw new Error('README has no "Use it in your project" section');
  return README.slice(start, end);
})();

/** The section's code blocks, in order. */
const BLOCKS = [...SECTION.matchAll(/```(\w+)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1], text: m[2] }));

/** The section's file: the block whose first line is `// NAME`. */
function readmeFile(name: string): string {
  const block = BLOCKS.find((b) => b.text.startsWith(`// ${name}\n`));
  if (!block) throw new Error(`README's "Use it in your project" shows no ${name}`);
  return block.text;
}

/** The section's first bash block: the commands that set a new project up. */
const SETUP = BLOCKS.find((b) => b.lang === 'bash')?.text.split('\n').filter(Boolean) ?? [];

let work: string;
let app: string;
let tarballs: { server: string; client: string };
let dev: { child: ChildProcess; output(): string; exited: Promise<number | null> } | undefined;
let typecheck: Promise<Run[]>;

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), 'stepwise-packaging-'));
  // Embedded PostgreSQL runs as `postgres` when we are root: it must reach the project's node_modules and .stepwise/.
  chmodSync(work, 0o755);
  const packed = (await run(process.execPath, [path.join(ROOT, 'scripts', 'pack.mjs'), '--out', path.join(work, 'packs')], { cwd: ROOT })).stdout.trim().split('\n');
  tarballs = { server: packed.find((p) => /\/stepwise-workflows-\d[^/]*\.tgz$/.test(p)) as string, client: packed.find((p) => /\/stepwise-workflows-client-[^/]*\.tgz$/.test(p)) as string };
  expect(tarballs.server && tarballs.client).toBeTruthy();

  // The README's setup, word for word, but for `mkdir`/`cd` (the temporary folder) and the install
  // from the registry, which becomes the install of the tarballs the README shows next.
  app = path.join(work, 'my-service');
  mkdirSync(app);
  expect(SETUP[0]).toBe('mkdir my-service && cd my-service');
  expect(SETUP[SETUP.length - 1]).toBe('npm install stepwise-workflows stepwise-workflows-client');
  for (const line of SETUP.slice(1, -1)) await run('bash', ['-c', line], { cwd: app });
  expect(SECTION).toContain('npm install /path/to/clone/.packs/stepwise-workflows-0.1.0.tgz /path/to/clone/.packs/stepwise-workflows-client-0.1.0.tgz');
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', tarballs.server, tarballs.client], { cwd: app });

  writeFileSync(path.join(app, 'tasks.ts'), readmeFile('tasks.ts'));
  writeFileSync(path.join(app, 'client.ts'), readmeFile('client.ts'));
  // The CommonJS script beside the ES modules, in the project the README's setup made "type": "module".
  writeFileSync(path.join(app, 'client.cjs'), readmeFile('client.cjs'));

  // tsc takes a while: it starts now and runs beside the other tests; the last one reads its result.
  typecheck = startTypecheck();
}, 360_000);

afterAll(async () => {
  if (dev && existsSync(path.join(app, '.stepwise', 'dev.lock'))) {
    killGroup(dev.child, 'SIGKILL');
    stopLeftoverPostgres();
  }
  await typecheck?.catch(() => undefined);
  if (work) {
    const pgdata = path.join(app ?? work, '.stepwise', 'pgdata');
    // Placed outside the project (root, with a folder `postgres` cannot reach): that folder goes too.
    if (existsSync(pgdata) && lstatSync(pgdata).isSymbolicLink()) rmSync(path.dirname(readlinkSync(pgdata)), { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
});

function killGroup(child: ChildProcess, signal: NodeJS.Signals) {
  try {
    process.kill(-(child.pid as number), signal);
  } catch {
    // already gone
  }
}

/** After a SIGKILL: the embedded server that `dev` started is stopped here instead. */
function stopLeftoverPostgres() {
  const pidFile = path.join(app, '.stepwise', 'pgdata', 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  try {
    if (pid > 0) process.kill(pid, 'SIGQUIT');
  } catch {
    // not running
  }
}

/** tsc over the project's files and a file of type assertions, under node16 and bundler resolution. */
function startTypecheck(): Promise<Run[]> {
  writeFileSync(
    path.join(app, 'types-check.ts'),
    `import { createStepwiseClient, StepwiseApiError, type Execution, type ExecutionStatus } from 'stepwise-workflows-client';
import { createStepwiseClient as fromServerPackage } from 'stepwise-workflows/client';
import { defineTask, schedule, Type, type TaskDefinition } from 'stepwise-workflows';

const client = createStepwiseClient({ baseUrl: 'http://127.0.0.1:8080' });
// @ts-expect-error: a task name is a string
void client.schedule(42);
const status: ExecutionStatus = 'completed';
// @ts-expect-error: not an execution status
const wrong: ExecutionStatus = 'lost';
export async function outputOf(id: string): Promise<unknown> {
  const execution: Execution = await client.wait(id);
  return execution.output;
}
export const fromServer: Promise<Execution> = fromServerPackage({ baseUrl: 'http://127.0.0.1:8080' }).get('x');
export const task: TaskDefinition = defineTask({
  name: 'typed',
  data: Type.Object({ n: Type.Number() }),
  async run(_ctx, data) {
    // @ts-expect-error: n is a number
    const s: string = data.n;
    return { s };
  },
});
export { schedule, StepwiseApiError, status, wrong };
`,
  );
  const base = { target: 'ES2022', strict: true, noEmit: true, types: ['node'] };
  writeFileSync(
    path.join(app, 'tsconfig.node16.json'),
    JSON.stringify({
      // skipLibCheck off: the shipped declarations must resolve everything they import.
      compilerOptions: { ...base, module: 'node16', moduleResolution: 'node16', allowJs: true, checkJs: true, skipLibCheck: false },
      files: ['tasks.ts', 'client.ts', 'client.cjs', 'types-check.ts'],
    }),
  );
  writeFileSync(
    path.join(app, 'tsconfig.bundler.json'),
    JSON.stringify({ compilerOptions: { ...base, module: 'preserve', moduleResolution: 'bundler', skipLibCheck: true }, files: ['tasks.ts', 'client.ts', 'types-check.ts'] }),
  );
  return Promise.all(['tsconfig.node16.json', 'tsconfig.bundler.json'].map((config) => run(TSC, ['-p', config], { cwd: app, allowFailure: true })));
}

function installedManifest(name: string): Record<string, any> {
  return JSON.parse(readFileSync(path.join(app, 'node_modules', name, 'package.json'), 'utf8'));
}

async function tarballFiles(tarball: string): Promise<string[]> {
  return (await run('tar', ['-tzf', tarball], { cwd: work })).stdout
    .trim()
    .split('\n')
    .map((f) => f.replace(/^package\//, ''))
    .sort();
}

describe('the npm packages', () => {
  test('stepwise-workflows-client: ESM and CommonJS builds with types, openapi-fetch its only dependency, no server code or node: import', async () => {
    const manifest = installedManifest('stepwise-workflows-client');
    expect(manifest).toMatchObject({
      name: 'stepwise-workflows-client',
      version: installedManifest('stepwise-workflows').version,
      license: 'MIT',
      engines: { node: '>=20' },
      dependencies: { 'openapi-fetch': installedManifest('stepwise-workflows').dependencies['openapi-fetch'] },
      exports: {
        '.': {
          import: { types: './dist/esm/index.d.ts', default: './dist/esm/index.js' },
          require: { types: './dist/cjs/index.d.ts', default: './dist/cjs/index.js' },
        },
      },
    });
    expect(Object.keys(manifest.dependencies)).toEqual(['openapi-fetch']);
    expect(manifest.private).toBeUndefined();
    expect(await tarballFiles(tarballs.client)).toEqual(
      [
        'LICENSE',
        'README.md',
        'package.json',
        ...['esm', 'cjs'].flatMap((d) => ['errors.d.ts', 'event-stream.d.ts', 'index.d.ts', 'index.js', 'openapi.d.ts', 'package.json', 'watch.d.ts'].map((f) => `dist/${d}/${f}`)),
      ].sort(),
    );
    const dir = path.join(app, 'node_modules', 'stepwise-workflows-client', 'dist');
    const esm = readFileSync(path.join(dir, 'esm', 'index.js'), 'utf8');
    const cjs = readFileSync(path.join(dir, 'cjs', 'index.js'), 'utf8');
    expect([...esm.matchAll(/^import .* from "([^"]+)"/gm)].map((m) => m[1])).toEqual(['openapi-fetch']);
    expect([...esm.matchAll(/\bimport\(|\brequire\(/g)]).toEqual([]);
    expect([...cjs.matchAll(/\brequire\("([^"]+)"\)/g)].map((m) => m[1])).toEqual(['openapi-fetch']);
    for (const code of [esm, cjs]) expect(code).not.toMatch(/node:|process\.|Buffer|__dirname/);
    expect(JSON.parse(readFileSync(path.join(dir, 'esm', 'package.json'), 'utf8'))).toEqual({ type: 'module' });
    expect(JSON.parse(readFileSync(path.join(dir, 'cjs', 'package.json'), 'utf8'))).toEqual({ type: 'commonjs' });
  });

  test('stepwise: publishable, with the command, the compiled code, its types and what the server reads at run time', async () => {
    const manifest = installedManifest('stepwise-workflows');
    expect(manifest.private).toBeUndefined();
    expect(manifest).toMatchObject({
      name: 'stepwise-workflows',
      license: 'MIT',
      bin: { stepwise: 'bin/stepwise.js' },
      exports: {
        '.': { types: './dist/index.d.ts', default: './dist/index.js' },
        './client': { types: './dist/client/index.d.ts', default: './dist/client/index.js' },
      },
    });
    expect(manifest.engines.node).toMatch(/^>=20/);
    const files = await tarballFiles(tarballs.server);
    for (const file of [
      'LICENSE',
      'README.md',
      'CHANGELOG.md',
      'bin/stepwise.js',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/cli.js',
      'dist/client/index.js',
      'dist/client/index.d.ts',
      'generated/openapi.d.ts', // the client's types import it
      'openapi.yaml', // the server validates against it
      'examples/index.ts', // `stepwise dev` without --tasks
      'src/ui/main.tsx', // the dashboard, bundled when first served
      'docs/api.md', // the guides, served at /docs/guides/
      'docs/writing-tasks.md',
    ]) {
      expect(files).toContain(file);
    }
    expect(files.filter((f) => /^(test|scripts|packages)\/|\.map$|^src\/(store|engine|api)\/|^tsconfig/.test(f))).toEqual([]);
    expect(files.filter((f) => f.startsWith('docs/') && !/^docs\/[a-z0-9-]+\.md$/.test(f))).toEqual([]); // no screenshots
  });

  test('plain Node.js imports both packages from an ES module and from CommonJS, every export named', async () => {
    writeFileSync(
      path.join(app, 'esm-check.mjs'),
      `import { createRequire } from 'node:module';
import * as server from 'stepwise-workflows';
import * as serverClient from 'stepwise-workflows/client';
import * as client from 'stepwise-workflows-client';
import { defineTask, Type } from 'stepwise-workflows';
const require = createRequire(import.meta.url);
const missing = (name, esm) => Object.keys(require(name)).filter((k) => k !== '__esModule' && !(k in esm));
console.log(JSON.stringify({
  missing: [missing('stepwise-workflows', server), missing('stepwise-workflows/client', serverClient), missing('stepwise-workflows-client', client)],
  defineTask: typeof defineTask,
  object: typeof Type.Object,
  esm: Object.keys(client).sort(),
  cjs: Object.keys(require('stepwise-workflows-client')).sort(),
}));
`,
    );
    const result = JSON.parse((await run(process.execPath, ['esm-check.mjs'], { cwd: app })).stdout);
    expect(result).toMatchObject({ missing: [[], [], []], defineTask: 'function', object: 'function' });
    expect(result.esm).toEqual(result.cjs);
    expect(result.esm).toEqual(expect.arrayContaining(['createStepwiseClient', 'StepwiseApiError', 'StepwiseWaitTimeoutError']));
  });

  test("`npx stepwise dev --tasks ./tasks.ts` serves the project's task; the ESM client.ts and the CommonJS client.cjs schedule it and get its output", async () => {
    expect(SECTION).toContain('npx stepwise dev --tasks ./tasks.ts');
    const child = spawn('npx', ['stepwise', 'dev', '--tasks', './tasks.ts', '--port', '0'], {
      cwd: app,
      env: userEnv({ LOG_LEVEL: 'warn' }),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group: npx, its shell and stepwise stop together
    });
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    dev = { child, output: () => out, exited };
    let exitCode: number | null | undefined;
    void exited.then((code) => (exitCode = code));
    const url = await waitUntil(
      () => {
        if (exitCode !== undefined) throw new Error(`stepwise dev exited (${exitCode}): ${out}`);
        return /Stepwise is running at (http:\/\/\S+)\/api\/v1\n/.exec(out)?.[1];
      },
      'stepwise dev to start',
      120_000,
      100,
    );
    expect(out).toMatch(/^ {2}database: +postgres:\/\/\S+ \(embedded; data in \.stepwise\/pgdata\)$/m);

    const tasks = (await (await fetch(`${url}/api/v1/tasks`)).json()) as { items: { name: string }[] };
    expect(tasks.items.map((t) => t.name)).toEqual(['greet']);

    const env = userEnv({ STEPWISE_URL: url });
    const [esm, cjs] = await Promise.all([
      run('npx', ['tsx', 'client.ts'], { cwd: app, env, timeoutMs: 60_000 }),
      run(process.execPath, ['client.cjs'], { cwd: app, env, timeoutMs: 60_000 }),
    ]);
    expect(esm.stdout).toBe('completed {"greeting":"Hello, Ada!"}\n');
    expect(cjs.stdout).toBe('completed {"greeting":"Hello, Bo!"}\n');

    // The guides come from the installed package's docs/.
    const guides = await fetch(`${url}/docs/guides/`);
    expect(await guides.text()).toContain('<a href="writing-tasks.md">Writing tasks</a>');
    expect((await fetch(`${url}/docs/guides/api.md`)).status).toBe(200);

    // The dashboard is bundled from the package's src/ui when first served.
    const page = await fetch(`${url}/ui/`);
    expect(page.status).toBe(200);
    const script = /src="([^"]*app-[^"]+\.js)"/.exec(await page.text())?.[1];
    expect(script).toBeDefined();
    expect((await fetch(new URL(script as string, `${url}/ui/`))).status).toBe(200);

    killGroup(child, 'SIGTERM');
    await waitUntil(() => !existsSync(path.join(app, '.stepwise', 'dev.lock')), 'stepwise dev to stop and release .stepwise/', 60_000, 100);
    await exited;
    dev = undefined;
  });

  test("tsc checks the project's files against the shipped types, under node16 and bundler resolution", async () => {
    const [node16, bundler] = await typecheck;
    expect(`node16: ${node16.stdout}${node16.stderr}`).toBe('node16: ');
    expect(`bundler: ${bundler.stdout}${bundler.stderr}`).toBe('bundler: ');
  });
});
