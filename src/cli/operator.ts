/**
 * The operator commands: `executions`, `events`, `tasks` and `workers`, over the typed HTTP client
 * (never the database), so they work against any server an operator can reach, with its token.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { createStepwiseClient, StepwiseWaitTimeoutError, type Execution, type StepwiseClient } from '../client';
import { EXECUTION_STATUSES, isTerminal } from '../domain/status';
import { describeFailure, EXIT, EXIT_CODES_HELP, OutcomeError, UsageError } from './failures';
import { sanitize } from './format';
import { isJsonObject, readJsonInput } from './json-input';
import {
  renderCancelled,
  renderDelivered,
  renderExecution,
  renderExecutionList,
  renderScheduled,
  renderSteps,
  renderTasks,
  renderWorkers,
} from './render';

/** Where the operator commands look for a server when neither --url nor STEPWISE_URL says. */
export const DEFAULT_URL = 'http://127.0.0.1:8080';

/** The version in package.json (two levels up from both src/cli and dist/cli). */
export function packageVersion(): string {
  const file = path.join(__dirname, '..', '..', 'package.json');
  return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version;
}

interface ConnectionFlags {
  url: string;
  token?: string;
  json?: boolean;
}

function parseCount(minimum: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < minimum) {
      throw new InvalidArgumentError(minimum === 0 ? 'must be an integer, 0 or more' : `must be an integer, ${minimum} or more`);
    }
    return n;
  };
}

function parseSeconds(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0) throw new InvalidArgumentError('must be a number of seconds, 0 or more');
  return n;
}

/** The base URL for the client, or a UsageError for anything that is not http(s). */
function checkUrl(url: string): string {
  const protocol = URL.canParse(url) ? new URL(url).protocol : undefined;
  if (protocol !== 'http:' && protocol !== 'https:') {
    throw new UsageError(`--url must be an http:// or https:// URL, such as ${DEFAULT_URL}; got ${JSON.stringify(url)}`);
  }
  return url.replace(/\/+$/, '');
}

function print(text: string): void {
  process.stdout.write(text);
}

function printJson(document: unknown): void {
  process.stdout.write(`${JSON.stringify(document, null, 2)}\n`);
}

/**
 * Runs one command's body with a client for --url and --token. Whatever it throws ends as one
 * line on stderr and the matching exit code (set, not forced, so stdout is flushed first).
 */
async function withClient(flags: ConnectionFlags, body: (client: StepwiseClient) => Promise<void>): Promise<void> {
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
function withConnectionOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('--url <url>', 'the Stepwise server, with its base path if it has one').env('STEPWISE_URL').default(DEFAULT_URL))
    .addOption(new Option('--token <token>', 'API bearer token (prefer the environment variable: flags show in ps)').env('STEPWISE_TOKEN'))
    .option('--json', "print the API's JSON answer as-is, one document, instead of text");
}

/**
 * A group of operator commands. Its usage errors print one line and exit 2 (the other commands of
 * `stepwise` keep commander's 1); help and --version still exit 0.
 */
function commandGroup(program: Command, name: string, description: string): Command {
  return program
    .command(name)
    .description(description)
    .showHelpAfterError(false)
    .configureOutput({ outputError: (text, write) => write(text.replace(/^error: /, 'stepwise: ')) })
    .exitOverride((err) => {
      process.exit(err.exitCode === 0 ? EXIT.ok : EXIT.usage);
    })
    .addHelpText('after', EXIT_CODES_HELP);
}

/** Waits for the end of execution `id`, prints it, and ends with the code its status calls for. */
async function waitForEnd(client: StepwiseClient, id: string, timeoutSeconds: number | undefined, json: boolean): Promise<void> {
  // One plain read first: a wrong id or an unreachable server fails here at once, where `wait`
  // alone would retry network errors until its deadline (and there may be none).
  let execution: Execution = await client.get(id);
  if (!isTerminal(execution.status)) {
    try {
      execution = await client.wait(id, { deadlineMs: timeoutSeconds === undefined ? undefined : timeoutSeconds * 1000 });
    } catch (err) {
      if (!(err instanceof StepwiseWaitTimeoutError)) throw err;
      if (json) printJson(await client.get(id));
      throw new OutcomeError(`execution ${id} is still ${err.lastStatus} after ${timeoutSeconds} s (--timeout)`, EXIT.timedOut);
    }
  }
  if (json) printJson(execution);
  else print(renderExecution(execution));
  if (execution.status === 'failed') {
    const why = execution.error ? `: ${execution.error.type}: ${execution.error.message}` : '';
    throw new OutcomeError(`execution ${id} failed${why}`, EXIT.failed);
  }
  if (execution.status === 'cancelled') throw new OutcomeError(`execution ${id} was cancelled`, EXIT.cancelled);
}

function addExecutionCommands(program: Command): void {
  const executions = commandGroup(program, 'executions', 'list, inspect, schedule, wait for and cancel executions');

  withConnectionOptions(executions.command('list').description('list executions, newest first'))
    .addOption(new Option('--status <status>', 'only executions in this status').choices(EXECUTION_STATUSES))
    .option('--task <name>', 'only executions of this task')
    .option('--parent <id>', 'only the child executions this execution started')
    .option('--limit <n>', 'page size, up to 500 (default 50)', parseCount(1))
    .option('--offset <n>', 'executions to skip (default 0)', parseCount(0))
    .addOption(new Option('--order <order>', 'newest first (desc) or oldest first (asc)').choices(['asc', 'desc']))
    .action(async (flags: ConnectionFlags & { status?: Execution['status']; task?: string; parent?: string; limit?: number; offset?: number; order?: 'asc' | 'desc' }) =>
      withClient(flags, async (client) => {
        const list = await client.list({
          status: flags.status,
          task: flags.task,
          parent_execution_id: flags.parent,
          limit: flags.limit,
          offset: flags.offset,
          order: flags.order,
        });
        if (flags.json) printJson(list);
        else print(renderExecutionList(list));
      }),
    );

  withConnectionOptions(executions.command('get').description("an execution's full state").argument('<id>', 'the execution id')).action(
    async (id: string, flags: ConnectionFlags) =>
      withClient(flags, async (client) => {
        const execution = await client.get(id);
        if (flags.json) printJson(execution);
        else print(renderExecution(execution));
      }),
  );

  withConnectionOptions(
    executions
      .command('schedule')
      .description('schedule an execution of a task')
      .argument('<task>', 'the task name')
      .argument('[data]', "the task's input, a JSON object, or - for stdin (default {})"),
  )
    .option('--data-file <file>', 'read the input from this file (- for stdin)')
    .option('--key <idempotency-key>', 'at most one execution per key: a repeat returns the existing one')
    .option('--start-at <instant>', 'start no earlier than this ISO 8601 instant with a time zone, such as 2030-01-06T09:00:00Z')
    .option('-q, --quiet', 'print only the execution id')
    .action(async (task: string, inline: string | undefined, flags: ConnectionFlags & { dataFile?: string; key?: string; startAt?: string; quiet?: boolean }) =>
      withClient(flags, async (client) => {
        const data = await readJsonInput({ inline, file: flags.dataFile, name: 'DATA', fileFlag: '--data-file', fallback: {} });
        if (!isJsonObject(data)) throw new UsageError(`the data must be a JSON object, such as '{"orderId":"A-1"}'; got ${JSON.stringify(data)?.slice(0, 60)}`);
        const { created, ...scheduled } = await client.schedule(task, data, { idempotencyKey: flags.key, startAt: flags.startAt });
        if (flags.json) printJson(scheduled);
        else print(flags.quiet ? `${scheduled.execution_id}\n` : renderScheduled(scheduled, created));
      }),
    );

  withConnectionOptions(
    executions
      .command('wait')
      .description('wait until an execution completes, fails or is cancelled, then print it')
      .argument('<id>', 'the execution id'),
  )
    .option('--timeout <seconds>', 'give up after this long (default: wait for as long as it takes)', parseSeconds)
    .addHelpText('after', '\nExits 0 when the execution completed, 4 when it failed, 5 when it was cancelled, 6 when --timeout passed first.')
    .action(async (id: string, flags: ConnectionFlags & { timeout?: number }) =>
      withClient(flags, (client) => waitForEnd(client, id, flags.timeout, flags.json === true)),
    );

  withConnectionOptions(executions.command('cancel').description('cancel a pending, running or waiting execution').argument('<id>', 'the execution id')).action(
    async (id: string, flags: ConnectionFlags) =>
      withClient(flags, async (client) => {
        const cancelled = await client.cancel(id);
        if (flags.json) printJson(cancelled);
        else print(renderCancelled(cancelled));
      }),
  );

  withConnectionOptions(
    executions.command('steps').description("an execution's durable history: its steps, sleeps, event waits and children, with failed attempts").argument('<id>', 'the execution id'),
  ).action(async (id: string, flags: ConnectionFlags) =>
    withClient(flags, async (client) => {
      const items = await client.listSteps(id);
      if (flags.json) printJson({ items });
      else print(renderSteps(items));
    }),
  );
}

function addEventCommands(program: Command): void {
  const events = commandGroup(program, 'events', 'deliver events to executions that wait for them');
  withConnectionOptions(
    events
      .command('send')
      .description('deliver an event to an execution that waits for it')
      .argument('<id>', 'the execution id')
      .argument('<event>', 'the event name, as the handler passed it to ctx.waitForEvent')
      .argument('[payload]', 'the payload, any JSON value, or - for stdin (default null)'),
  )
    .option('--payload-file <file>', 'read the payload from this file (- for stdin)')
    .action(async (id: string, event: string, inline: string | undefined, flags: ConnectionFlags & { payloadFile?: string }) =>
      withClient(flags, async (client) => {
        const payload = await readJsonInput({ inline, file: flags.payloadFile, name: 'PAYLOAD', fileFlag: '--payload-file', fallback: null });
        const delivered = await client.sendEvent(id, event, payload);
        if (flags.json) printJson(delivered);
        else print(renderDelivered(delivered));
      }),
    );
}

function addTaskAndWorkerCommands(program: Command): void {
  const tasks = commandGroup(program, 'tasks', 'the tasks workers have registered');
  withConnectionOptions(tasks.command('list').description('registered tasks with their executions counted by status')).action(async (flags: ConnectionFlags) =>
    withClient(flags, async (client) => {
      const items = await client.listTasks();
      if (flags.json) printJson({ items });
      else print(renderTasks(items));
    }),
  );

  withConnectionOptions(commandGroup(program, 'workers', 'the worker processes serving this database, and how busy each is')).action(
    async (flags: ConnectionFlags) =>
      withClient(flags, async (client) => {
        const workers = await client.listWorkers();
        if (flags.json) printJson({ workers });
        else print(renderWorkers(workers));
      }),
  );
}

/** Adds the operator commands (executions, events, tasks, workers) to `program`. */
export function addOperatorCommands(program: Command): void {
  addExecutionCommands(program);
  addEventCommands(program);
  addTaskAndWorkerCommands(program);
  program.addHelpText('after', `\nThe operator commands talk to a running server over HTTP: --url (env STEPWISE_URL, default ${DEFAULT_URL}) and --token (env STEPWISE_TOKEN).\n${EXIT_CODES_HELP}`);
}
