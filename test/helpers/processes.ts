import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

const ROOT = path.join(__dirname, '..', '..');

/** A child process started by a test, with its output collected. */
export interface TestProcess {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

/** Spawns `node --import tsx <script> ...args` from the repository root and resolves once it prints `readyLine`. */
export async function spawnTsx(script: string, args: string[], env: NodeJS.ProcessEnv, readyLine = 'ready', timeoutMs = 20000): Promise<TestProcess> {
  // node itself (not the tsx CLI, which forks a grandchild) so that a signal reaches the worker.
  const child = spawn(process.execPath, ['--conditions=stepwise-source', '--import', 'tsx', script, ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`process did not print ${readyLine}: ${out}`)), timeoutMs);
    const check = () => {
      if (out.includes(readyLine)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', check);
    child.stderr?.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      if (!out.includes(readyLine)) reject(new Error(`process exited (${code}) before ready: ${out}`));
    });
  });
  return { child, output: () => out, exited };
}
