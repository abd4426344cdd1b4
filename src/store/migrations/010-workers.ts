import type { Knex } from 'knex';

/**
 * `workers`: each worker process registers itself when it starts, heartbeats while it runs and
 * deletes its row when it stops, so operators see who serves which task (GET /workers, GET /tasks).
 *
 * - `state` is what the worker last said of itself ('active', or 'stopping' once its shutdown began);
 *   readers report a row as 'lost' when `last_seen_at` is older than `lost_after_ms`, which each worker
 *   records from its own heartbeat interval, so a reader needs no knowledge of any worker's options.
 * - `running`: handlers running at the last heartbeat.
 *
 * A handful of rows per deployment (one per worker process): the primary key is the only index.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE stepwise.workers (
      worker_id      uuid PRIMARY KEY,
      hostname       text NOT NULL,
      pid            integer NOT NULL,
      version        text NOT NULL,
      tasks          text[] NOT NULL,
      concurrency    integer NOT NULL,
      running        integer NOT NULL DEFAULT 0,
      lost_after_ms  integer NOT NULL CHECK (lost_after_ms > 0),
      state          text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'stopping')),
      started_at     timestamptz NOT NULL DEFAULT now(),
      last_seen_at   timestamptz NOT NULL DEFAULT now()
    );
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE stepwise.workers');
}
