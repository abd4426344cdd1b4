import path from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { ConfigError, keepFinishedMs, loadConfig, parseRetention, type Config } from './config';
import { addOperatorCommands, packageVersion } from './cli/operator';
import { oneLineUsageErrors } from './cli/command-runner';
import { TasksFileError } from './engine/registry';
import { createLogger } from './logger';
import { StartupError } from './errors';
import type { Running } from './main';

/** The server's code, loaded only by the commands that run it: the operator commands start at once. */
const server = async (): Promise<typeof import('./main')> => require('./main');

function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('must be an integer from 0 to 65535');
  return n;
}

function parsePositive(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

interface CommonFlags {
  config?: string;
  port?: number;
  basePath?: string;
  concurrency?: number;
}

function configFrom(flags: CommonFlags, defaults?: Record<string, unknown>): Readonly<Config> {
  return loadConfig({
    file: flags.config,
    overrides: { port: flags.port, basePath: flags.basePath, 'worker.concurrency': flags.concurrency },
    defaults,
  });
}

/**
 * What `stepwise dev` changes of the defaults (a config file or the environment still decides): a
 * local receiver (localhost, a container on a private network) is what webhooks target in development.
 */
export const DEV_DEFAULTS: Readonly<Record<string, unknown>> = Object.freeze({ 'webhooks.allowPrivateTargets': true });

const configOption = () => new Option('-c, --config <file>', 'JSON config file (default: ./stepwise.config.json when present)');
const portOption = () => new Option('-p, --port <n>', 'HTTP port (env PORT, default 8080)').argParser(parsePort);
const basePathOption = () => new Option('--base-path <path>', 'mount the API under this path (env STEPWISE_BASE_PATH)');
const concurrencyOption = () => new Option('--concurrency <n>', 'handlers run at once (env STEPWISE_CONCURRENCY, default 32)').argParser(parsePositive);

/**
 * What `stepwise dev` prints once ready: the URLs of the API, the dashboard, the API reference and the
 * database. The embedded database's URL is printed whole (a loopback-only server with a fixed
 * development password) for psql and for schedule() in your own transaction; a DATABASE_URL of yours
 * is described without its password.
 */
export function devBanner(running: Running, describeDatabaseUrl: (url: string) => string): string {
  let database = `${describeDatabaseUrl(running.databaseUrl)} (DATABASE_URL)`;
  if (running.embedded) {
    const rel = path.relative(process.cwd(), running.embedded.dataDir);
    database = `${running.databaseUrl} (embedded; data in ${rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : running.embedded.dataDir})`;
  }
  return (
    `\nStepwise is running at ${running.url}/api/v1\n` +
    `  dashboard:     ${running.url}/ui\n` +
    `  API reference: ${running.url}/docs\n` +
    `  database:      ${database}\n` +
    `  Stop with Ctrl-C.\n\n`
  );
}

/** Builds the `stepwise` command. */
export function buildProgram(): Command {
  const program = new Command('stepwise')
    .description('Durable workflow executions over HTTP/JSON, on PostgreSQL');

  program
    .command('dev')
    .description('everything in one process: embedded PostgreSQL (in .stepwise/) unless DATABASE_URL is set, migrations, API and a worker; prints the URLs of the API, dashboard, API reference and database')
    .option('-t, --tasks <file>', 'tasks module (.ts, .js, .mjs); default: the bundled examples')
    .addOption(portOption())
    .addOption(basePathOption())
    .addOption(concurrencyOption())
    .addOption(configOption())
    .action(async (flags: CommonFlags & { tasks?: string }) => {
      const config = configFrom(flags, DEV_DEFAULTS);
      const log = createLogger({ level: config.logLevel });
      const { EXAMPLE_TASKS_FILE, startStepwise, stopOnSignals } = await server();
      const running = await startStepwise({
        config,
        api: true,
        tasksFile: flags.tasks ?? EXAMPLE_TASKS_FILE,
        embeddedDir: path.resolve('.stepwise'),
        migrate: true,
        log,
      });
      stopOnSignals(running, config, log);
      log.info({ url: running.url }, 'stepwise dev is ready');
      process.stdout.write(devBanner(running, (await server()).describeDatabaseUrl));
    });

  program
    .command('serve')
    .description('API server only (needs DATABASE_URL and applied migrations)')
    .addOption(portOption())
    .addOption(basePathOption())
    .addOption(configOption())
    .action(async (flags: CommonFlags) => {
      const config = configFrom(flags);
      const log = createLogger({ level: config.logLevel });
      const { startStepwise, stopOnSignals } = await server();
      const running = await startStepwise({ config, api: true, migrate: false, log });
      stopOnSignals(running, config, log);
      log.info({ url: running.url }, 'stepwise api listening');
    });

  program
    .command('worker')
    .description('worker only: runs the tasks of a module (needs DATABASE_URL and applied migrations, or --url)')
    .requiredOption('-t, --tasks <file>', 'tasks module (.ts, .js, .mjs)')
    .addOption(concurrencyOption())
    .addOption(configOption())
    .addOption(new Option('--url <url>', 'run remotely through the API server at this URL (several: comma-separated), with no database access (env STEPWISE_URL)'))
    .addOption(new Option('--token <token>', 'the API token to present with --url (env STEPWISE_TOKEN)'))
    .action(async (flags: CommonFlags & { tasks: string; url?: string; token?: string }) => {
      const config = configFrom(flags);
      const log = createLogger({ level: config.logLevel });
      const { startRemoteWorker, startStepwise, stopOnSignals } = await server();
      const url = flags.url ?? process.env.STEPWISE_URL;
      const running = url
        ? await startRemoteWorker({ config, tasksFile: flags.tasks, url, token: flags.token ?? process.env.STEPWISE_TOKEN, concurrency: flags.concurrency, log })
        : await startStepwise({ config, api: false, tasksFile: flags.tasks, concurrency: flags.concurrency, migrate: false, log });
      stopOnSignals(running, config, log);
    });

  program
    .command('migrate')
    .description('apply database migrations and exit (needs DATABASE_URL)')
    .addOption(configOption())
    .action(async (flags: CommonFlags) => {
      const config = configFrom(flags);
      const log = createLogger({ level: config.logLevel });
      const applied = await (await server()).runMigrations(config, log);
      log.info({ applied }, applied.length ? 'migrations applied' : 'database is up to date');
    });

  program
    .command('prune')
    .description('delete finished executions (completed, failed, cancelled) older than the retention period now, and exit (needs DATABASE_URL)')
    .option('--older-than <duration>', "finished longer ago than this, e.g. '7d' (default: the configured retention, STEPWISE_RETENTION)")
    .addOption(configOption())
    .action(async (flags: CommonFlags & { olderThan?: string }) => {
      const config = configFrom(flags);
      const log = createLogger({ level: config.logLevel });
      const olderThanMs = flags.olderThan !== undefined ? parseRetention(flags.olderThan, '--older-than') : keepFinishedMs(config);
      if (olderThanMs === undefined) {
        throw new ConfigError(flags.olderThan !== undefined ? '--older-than must be a duration such as 7d' : "retention is 'forever': say how old with --older-than");
      }
      const deleted = await (await server()).pruneNow(config, olderThanMs, log);
      process.stdout.write(`deleted ${deleted} finished execution${deleted === 1 ? '' : 's'}\n`);
    });

  program.version(packageVersion(), '-V, --version', 'print the version');
  addOperatorCommands(program);

  return oneLineUsageErrors(program);
}

/** Entry point of bin/stepwise.js. Operator errors print one line and exit 1; never a stack. */
export async function main(argv: string[]): Promise<void> {
  try {
    await buildProgram().parseAsync(argv);
  } catch (err) {
    if (err instanceof ConfigError || err instanceof StartupError || err instanceof TasksFileError) {
      process.stderr.write(`stepwise: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}
