import type { Knex } from 'knex';

/**
 * Event deliveries a client may retry: `event_deliveries` keeps, per execution, event name and the
 * client's `Idempotency-Key`, the answer of the delivery that key made, written in the statement that
 * delivers. A repeat finds it by primary key and answers it again. Rows go with their execution
 * (retention deletes the execution, the cascade its deliveries). Deliveries without a key write
 * nothing here.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE stepwise.event_deliveries (
      execution_id    uuid NOT NULL REFERENCES stepwise.executions (id) ON DELETE CASCADE,
      event_name      text NOT NULL,
      idempotency_key text NOT NULL,
      answer          jsonb NOT NULL,
      created_at      timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (execution_id, event_name, idempotency_key)
    );
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE stepwise.event_deliveries');
}
