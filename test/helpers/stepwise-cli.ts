import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

const ROOT = path.join(__dirname, '..', '..');
const BIN = path.join(ROOT, 'bin', 'stepwise.js');

/** How a `stepwise` run ended. */
export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliRunOptions {
  env?: NodeJS.ProcessEnv;
  /** Written to the command's stdin, which is then closed (else stdin is empty). */
  stdin?: string;
  timeoutMs?: number;
  /**
   * Run it on a pseudo-terminal (util-linux `script`), so that stdin is a TTY: stdout and stderr
   * then arrive together in `stdout` (the prompt, the answer's echo and the output, `\r\n` made `\n`).
   */
  tty?: boolean;
}

/** Whether `runStepwise(…, { tty: true })` can run here: it needs util-linux's `script`. */
export const canRunOnTty = ['/usr/bin/script', '/bin/script'].some((file) => fs.existsSync(file));

function shellQuote(arg: string): string {
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/**
 * Runs the real `stepwise` command from source as a child process and collects its output. The
 * operator variables (STEPWISE_URL, STEPWISE_TOKEN) of the test's own environment are not passed on.
 */
export function runStepwise(args: string[], options: CliRunOptions = {}): Promise<CliRun> {
  const { STEPWISE_URL: _url, STEPWISE_TOKEN: _token, ...inherited } = process.env;
  return new Promise((resolve, reject) => {
    const command = [process.execPath, BIN, ...args];
    // -e: script exits with the command's code; -E never: the pipe fed to it is not echoed back.
    const [file, argv] = options.tty ? ['script', ['-qe', '-E', 'never', '-c', command.map(shellQuote).join(' '), '/dev/null']] : [command[0], command.slice(1)];
    const child = spawn(file, argv, {
      cwd: ROOT,
      // script runs the command line with $SHELL: a POSIX shell reads the quoting above.
      env: { ...inherited, STEPWISE_FROM_SOURCE: '1', LOG_LEVEL: 'warn', ...(options.tty ? { SHELL: '/bin/sh' } : {}), ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdin.end(options.stdin ?? '');
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`stepwise ${args.join(' ')} did not exit: ${stdout}${stderr}`));
    }, options.timeoutMs ?? 60000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: options.tty ? stdout.replace(/\r\n/g, '\n') : stdout, stderr });
    });
  });
}

/** A local port nothing listens on (it was free a moment ago). */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
