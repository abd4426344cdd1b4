/**
 * How one operator command runs: its connection options (--url, --token, --json), the client they
 * make, its output, and the one line and exit code it ends with when something fails.
 */
import { Option, type Command } from 'commander';
import { createStepwiseClient, type StepwiseClient } from '../client';
import { describeFailure, EXIT, EXIT_CODES_HELP, UsageError } from './failures';
import { sanitize } from './format';

/** Where the operator commands look for a server when neither --url nor STEPWISE_URL says. */
export const DEFAULT_URL = 'http://127.0.0.1:8080';

/** The options `withConnectionOptions` adds, as commander hands them to an action. */
export interface ConnectionFlags {
  url: string;
  token?: string;
  json?: boolean;
}

/** The base URL for the client, or a UsageError for anything that is not http(s). */
function checkUrl(url: string): string {
  const protocol = URL.canParse(url) ? new URL(url).protocol : undefined;
  if (protocol !== 'http:' && protocol !== 'https:') {
    throw new UsageError(`--url must be an http:// or https:// URL, such as ${DEFAULT_URL}; got ${JSON.stringify(url)}`);
  }
  return url.replace(/\/+$/, '');
}

/** Writes text to stdout as it is. */
export function print(text: string): void {
  process.stdout.write(text);
}

/** Writes one JSON document to stdout, indented. */
export function printJson(document: unknown): void {
  process.stdout.write(`${JSON.stringify(document, null, 2)}\n`);
}

/**
 * Runs one command's body with a client for --url and --token. Whatever it throws ends as one
 * line on stderr and the matching exit code (set, not forced, so stdout is flushed first).
 */
export async function withClient(flags: ConnectionFlags, body: (client: StepwiseClient) => Promise<void>): Promise<void> {
  // A reader that stops early (`| head`) is not an error worth a stack.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  });
  try {
    const client = createStepwiseClient({ baseUrl: checkUrl(flags.url), token: flags.token || undefined });
    await body(client);
  } catch (err) {
    const { line, exitCode } = describeFailure(err, flags.url);
    process.stderr.write(`stepwise: ${sanitize(line)}\n`);
    process.exitCode = exitCode;
  }
}

/** --url, --token and --json, on every operator command. */
export function withConnectionOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('--url <url>', 'the Stepwise server, with its base path if it has one').env('STEPWISE_URL').default(DEFAULT_URL))
    .addOption(new Option('--token <token>', 'API bearer token (prefer the environment variable: flags show in ps)').env('STEPWISE_TOKEN'))
    .option('--json', "print the API's JSON answer as-is, one document, instead of text");
}

/**
 * A group of operator commands (`webhooks`, …), with the exit codes in its help.
 */
export function commandGroup(program: Command, name: string, description: string): Command {
  return program.command(name).description(description).addHelpText('after', EXIT_CODES_HELP);
}

/** `stepwise executions list` for the command `list` under `executions` under `stepwise`. */
function commandPath(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/**
 * Every usage error of every command, however deep: one line on stderr that names the command and
 * points at its help, and exit code 2 (EXIT.usage); help and --version still exit 0. Applied once
 * the program is built, so commands added anywhere get it.
 */
export function oneLineUsageErrors(program: Command): Command {
  const visit = (cmd: Command): void => {
    const hint = `see '${commandPath(cmd)} --help'`;
    cmd
      .showHelpAfterError(false)
      .configureOutput({ outputError: (text, write) => write(`${text.trim().replace(/^error: /, 'stepwise: ')} (${hint})\n`) })
      .exitOverride((err) => {
        process.exit(err.exitCode === 0 ? EXIT.ok : EXIT.usage);
      });
    for (const sub of cmd.commands) visit(sub);
  };
  visit(program);
  return program;
}
