/**
 * The operator commands: `executions`, `events`, `tasks` and `workers`, over the typed HTTP client
 * (never the database), so they work against any server an operator can reach, with its token.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Option, type Command } from 'commander';
import { StepwiseWaitTimeoutError, type Execution, type StepwiseClient } from '../client';
import { EXECUTION_STATUSES, isTerminal } from '../domain/status';
import { collect, parseCount, parseInstantOption, parsePriority, parseSeconds } from './arguments';
import { addBulkCommands } from './bulk';
import { addUpgradeCommands } from './upgrade';
import { addWebhookCommands } from './webhooks';
import { commandGroup, DEFAULT_URL, print, printJson, withClient, withConnectionOptions, type ConnectionFlags } from './command-runner';
import { EXIT, EXIT_CODES_HELP, OutcomeError, UsageError } from './failures';
import { isJsonObject, readJsonInput } from './json-input';
import {
  renderAttempts,
  renderCancelled,
  renderDelivered,
  renderExecution,
  renderExecutionList,
  renderPauseState,
  renderRetried,
  renderScheduled,
  renderSteps,
  renderTasks,
  renderWatchLine,
  renderWorkers,
} from './render';

export { DEFAULT_URL };

/** The version in package.json (two levels up from both src/cli and dist/cli). */
export function packageVersion(): string {
  const file = path.join(__dirname, '..', '..', 'package.json');
  return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version;
}

interface ListFlags extends ConnectionFlags {
  status?: Execution['status'];
  task?: string;
  parent?: string;
  tag?: string[];
  idempotencyKey?: string;
  createdAfter?: string;
  createdBefore?: string;
  limit?: number;
  offset?: number;
  order?: 'asc' | 'desc';
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
  endAs(execution);
}

/** Ends a command that followed an execution to its end with the code its status calls for: 0, 4 or 5. */
function endAs(execution: Execution): void {
  const id = execution.execution_id;
  if (execution.status === 'failed') {
    const why = execution.error ? `: ${execution.error.type}: ${execution.error.message}` : '';
    throw new OutcomeError(`execution ${id} failed${why}`, EXIT.failed);
  }
  if (execution.status === 'cancelled') throw new OutcomeError(`execution ${id} was cancelled`, EXIT.cancelled);
}

/**
 * Prints every state of execution `id` as it changes (one line, or one JSON document per line with
 * --json) until it ends, then ends with the code its status calls for. The stream reconnects by itself
 * when the connection drops, printing the current state again.
 */
async function watchToEnd(client: StepwiseClient, id: string, json: boolean): Promise<void> {
  // One plain read first: a wrong id or an unreachable server fails here at once, where the stream
  // would retry network errors for as long as it takes.
  await client.get(id);
  let last: Execution | undefined;
  for await (const execution of client.watch(id)) {
    print(json ? `${JSON.stringify(execution)}\n` : renderWatchLine(execution, new Date()));
    last = execution;
  }
  if (last) endAs(last);
}

function addExecutionCommands(program: Command): void {
  const executions = commandGroup(program, 'executions', 'list, inspect, schedule, wait for, cancel, retry and upgrade executions, one or many');

  withConnectionOptions(executions.command('list').description('list executions, newest first'))
    .addOption(new Option('--status <status>', 'only executions in this status').choices(EXECUTION_STATUSES))
    .option('--task <name>', 'only executions of this task')
    .option('--parent <id>', 'only the child executions this execution started')
    .option('--tag <tag>', 'only executions with this tag; repeat it for executions with every tag given', collect)
    .option('--idempotency-key <key>', 'only the execution scheduled with this key')
    .option('--created-after <instant>', 'only executions created at or after this ISO 8601 instant, such as 2024-10-30T00:00:00Z', parseInstantOption)
    .option('--created-before <instant>', 'only executions created before this ISO 8601 instant', parseInstantOption)
    .option('--limit <n>', 'page size, up to 500 (default 50)', parseCount(1))
    .option('--offset <n>', 'executions to skip (default 0)', parseCount(0))
    .addOption(new Option('--order <order>', 'newest first (desc) or oldest first (asc)').choices(['asc', 'desc']))
    .action(async (flags: ListFlags) =>
      withClient(flags, async (client) => {
        const list = await client.list({
          status: flags.status,
          task: flags.task,
          parent_execution_id: flags.parent,
          tag: flags.tag,
          idempotency_key: flags.idempotencyKey,
          created_after: flags.createdAfter,
          created_before: flags.createdBefore,
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
    .option('--tag <tag>', 'a label to find the execution by (executions list --tag); repeat it for several, up to 20', collect)
    .option('--priority <n>', 'claimed before due executions of lower priority (-1000000 to 1000000, default 0)', parsePriority)
    .option('-q, --quiet', 'print only the execution id')
    .action(async (task: string, inline: string | undefined, flags: ConnectionFlags & { dataFile?: string; key?: string; startAt?: string; tag?: string[]; priority?: number; quiet?: boolean }) =>
      withClient(flags, async (client) => {
        const data = await readJsonInput({ inline, file: flags.dataFile, name: 'DATA', fileFlag: '--data-file', fallback: {} });
        if (!isJsonObject(data)) throw new UsageError(`the data must be a JSON object, such as '{"orderId":"A-1"}'; got ${JSON.stringify(data)?.slice(0, 60)}`);
        const { created, ...scheduled } = await client.schedule(task, data, { idempotencyKey: flags.key, startAt: flags.startAt, tags: flags.tag, priority: flags.priority });
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

  withConnectionOptions(
    executions
      .command('watch')
      .description('follow an execution live: one line per change (status, steps, what it waits for) until it ends')
      .argument('<id>', 'the execution id'),
  )
    .addHelpText('after', '\nWith --json, one JSON document per line (the execution as GET /executions/{id} answers it).\nExits 0 when the execution completed, 4 when it failed, 5 when it was cancelled.')
    .action(async (id: string, flags: ConnectionFlags) => withClient(flags, (client) => watchToEnd(client, id, flags.json === true)));

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
  )
    .option('--after-seq <seq>', 'one page only: the steps after this seq (a page\'s next_after_seq)', parseCount(0, 2147483647))
    .option('--limit <n>', 'one page only: this many steps at most, up to 1000 (default 100)', parseCount(1))
    .action(async (id: string, flags: ConnectionFlags & { afterSeq?: number; limit?: number }) =>
      withClient(flags, async (client) => {
        // Every page by default; with --after-seq or --limit, the one page asked for, and where the next starts.
        if (flags.afterSeq === undefined && flags.limit === undefined) {
          const items = await client.listSteps(id);
          if (flags.json) printJson({ items });
          else print(renderSteps(items));
          return;
        }
        const page = await client.listStepPage(id, { afterSeq: flags.afterSeq, limit: flags.limit });
        if (flags.json) printJson(page);
        else print(renderSteps(page.items) + (page.next_after_seq === null ? '' : `\nmore steps follow: --after-seq ${page.next_after_seq}\n`));
      }),
    );

  withConnectionOptions(
    executions
      .command('attempts')
      .description('every attempt of an execution, oldest first: its outcome, worker, timing and error')
      .argument('<id>', 'the execution id'),
  )
    .option('--stack', "also print the stack trace recorded with each attempt's error")
    .action(async (id: string, flags: ConnectionFlags & { stack?: boolean }) =>
      withClient(flags, async (client) => {
        const attempts = await client.listAttempts(id);
        if (flags.json) printJson({ attempts });
        else print(renderAttempts(attempts, flags.stack === true));
      }),
    );

  withConnectionOptions(
    executions
      .command('retry')
      .description('put a failed or cancelled execution back to pending, to resume from where it stopped (its completed steps are not run again)')
      .argument('<id>', 'the execution id'),
  ).action(async (id: string, flags: ConnectionFlags) =>
    withClient(flags, async (client) => {
      const retried = await client.retry(id);
      if (flags.json) printJson(retried);
      else print(renderRetried(retried));
    }),
  );

  addBulkCommands(executions);
  addUpgradeCommands(executions);
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
    .option('--idempotency-key <key>', 'safe to retry: a repeat with the same key answers the first delivery again, even after the execution moved on')
    .action(async (id: string, event: string, inline: string | undefined, flags: ConnectionFlags & { payloadFile?: string; idempotencyKey?: string }) =>
      withClient(flags, async (client) => {
        const payload = await readJsonInput({ inline, file: flags.payloadFile, name: 'PAYLOAD', fileFlag: '--payload-file', fallback: null });
        const delivered = await client.sendEvent(id, event, payload, { idempotencyKey: flags.idempotencyKey });
        if (flags.json) printJson(delivered);
        else print(renderDelivered(delivered));
      }),
    );
}

function addTaskAndWorkerCommands(program: Command): void {
  const tasks = commandGroup(program, 'tasks', 'the tasks workers have registered; pause and resume them');
  withConnectionOptions(tasks.command('list').description('registered tasks, whether each is paused, their executions counted by status, and their versions (* the current one, ! no worker serves its executions in flight)')).action(
    async (flags: ConnectionFlags) =>
      withClient(flags, async (client) => {
        const items = await client.listTasks();
        if (flags.json) printJson({ items });
        else print(renderTasks(items));
      }),
  );

  withConnectionOptions(
    tasks
      .command('pause')
      .description("stop claiming a task's executions: new ones are accepted and stay pending, running ones finish")
      .argument('<name>', 'the task name'),
  ).action(async (name: string, flags: ConnectionFlags) =>
    withClient(flags, async (client) => {
      const state = await client.pauseTask(name);
      if (flags.json) printJson(state);
      else print(renderPauseState(state));
    }),
  );

  withConnectionOptions(
    tasks.command('resume').description("let workers claim a paused task's executions again, at once").argument('<name>', 'the task name'),
  ).action(async (name: string, flags: ConnectionFlags) =>
    withClient(flags, async (client) => {
      const state = await client.resumeTask(name);
      if (flags.json) printJson(state);
      else print(renderPauseState(state));
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
  addWebhookCommands(program);
  program.addHelpText('after', `\nThe operator commands talk to a running server over HTTP: --url (env STEPWISE_URL, default ${DEFAULT_URL}) and --token (env STEPWISE_TOKEN).\n${EXIT_CODES_HELP}`);
}
