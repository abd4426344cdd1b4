// Compile-time test (checked by `tsc --noEmit`, not run by jest): handlers typed from the generated
// operations reject statuses and bodies openapi.yaml does not list. Each @ts-expect-error must fail
// to compile; if a mistake ever type-checks, tsc reports the unused directive.
import type { Handler } from '../../src/api/typed';

const execution = {
  execution_id: '0192d4c8-7a51-7cc2-9a1e-2f7f3c3b9d10',
  task: 't',
  status: 'pending' as const,
  data: null,
  steps_completed: 0,
  current_step: null,
  waiting_for_event: null,
  waiting_for_events: [],
  attempt: 0,
  created_at: '2024-01-01T00:00:00.000Z',
  start_at: null,
  started_at: null,
  completed_at: null,
  output: null,
  error: null,
  parent_execution_id: null,
  idempotency_key: null,
  tags: [],
  priority: 0,
  concurrency_key: null,
  task_version: null,
};

export const good: Handler<'getExecution'> = async () => ({ status: 200, body: execution });

// @ts-expect-error 201 is not a status getExecution lists
export const wrongStatus: Handler<'getExecution'> = async () => ({ status: 201, body: execution });

// @ts-expect-error a status outside the enum
export const wrongEnum: Handler<'getExecution'> = async () => ({ status: 200, body: { ...execution, status: 'bogus' as const } });

// @ts-expect-error a missing required field
export const missingField: Handler<'cancelExecution'> = async () => ({ status: 200, body: { execution_id: 'x' } });

// @ts-expect-error the 202 body of wait is not the full Execution
export const wrongBody: Handler<'waitForExecution'> = async () => ({ status: 202, body: execution });

export const bodyTyped: Handler<'scheduleExecution'> = async ({ body }) => {
  // @ts-expect-error the request body has no idempotencyKey (it is idempotency_key)
  void body.idempotencyKey;
  return { status: 201, body: { execution_id: 'x', task: body.task, status: 'pending', created_at: '' } };
};
