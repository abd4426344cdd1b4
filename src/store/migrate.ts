import type { Knex } from 'knex';
import * as m001 from './migrations/001-initial';
import * as m002 from './migrations/002-due-by-task';
import * as m003 from './migrations/003-running-apart';
import * as m004 from './migrations/004-start-at';
import * as m005 from './migrations/005-task-cron';
import * as m006 from './migrations/006-task-concurrency';
import * as m007 from './migrations/007-child-executions';
import * as m008 from './migrations/008-cancel-in-one-place';
import * as m009 from './migrations/009-parallel-waits';
import * as m010 from './migrations/010-workers';
import * as m011 from './migrations/011-operate';
import * as m012 from './migrations/012-find-executions';
import * as m013 from './migrations/013-idempotent-events';
import * as m014 from './migrations/014-webhooks';
import * as m015 from './migrations/015-flow-control';
import * as m016 from './migrations/016-task-versions';
import * as m017 from './migrations/017-trace-context';
import * as m018 from './migrations/018-execution-counts';
import * as m019 from './migrations/019-task-status-index';
import * as m020 from './migrations/020-values-as-written';
import * as m021 from './migrations/021-retry-timeout';
import * as m022 from './migrations/022-webhook-bodies-as-documented';
import * as m023 from './migrations/023-finished-index';

interface Migration {
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

/** Numbered migrations, listed in code so they work the same from source, from dist and in tests. */
const MIGRATIONS: ReadonlyArray<readonly [string, Migration]> = [
  ['001-initial', m001],
  ['002-due-by-task', m002],
  ['003-running-apart', m003],
  ['004-start-at', m004],
  ['005-task-cron', m005],
  ['006-task-concurrency', m006],
  ['007-child-executions', m007],
  ['008-cancel-in-one-place', m008],
  ['009-parallel-waits', m009],
  ['010-workers', m010],
  ['011-operate', m011],
  ['012-find-executions', m012],
  ['013-idempotent-events', m013],
  ['014-webhooks', m014],
  ['015-flow-control', m015],
  ['016-task-versions', m016],
  ['017-trace-context', m017],
  ['018-execution-counts', m018],
  ['019-task-status-index', m019],
  ['020-values-as-written', m020],
  ['021-retry-timeout', m021],
  ['022-webhook-bodies-as-documented', m022],
  ['023-finished-index', m023],
];

const source: Knex.MigrationSource<readonly [string, Migration]> = {
  getMigrations: async () => [...MIGRATIONS],
  getMigrationName: (m) => m[0],
  getMigration: async (m) => m[1],
};

const config: Knex.MigratorConfig = {
  migrationSource: source,
  tableName: 'stepwise_migrations',
  schemaName: 'public',
};

/** Applies every pending migration; safe to run from several processes at once (knex takes a lock). */
export async function migrateLatest(db: Knex): Promise<string[]> {
  const [, applied] = (await db.migrate.latest(config)) as [number, string[]];
  return applied;
}

/** True when every migration this build knows has been applied. */
export async function isMigrated(db: Knex): Promise<boolean> {
  const [, pending] = (await db.migrate.list(config)) as [unknown[], unknown[]];
  return pending.length === 0;
}
