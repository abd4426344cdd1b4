import type { Logger } from '../logger';
import { LeaseLostError } from './errors';
import type { SlotPool } from './slot-pool';
import type { WorkerBackend } from './worker-backend';

export interface LeaseRenewalOptions {
  backend: WorkerBackend;
  log: Logger;
  leaseMs: number;
  onDatabaseError: () => void;
}

/**
 * Extends, in one statement, the leases of every execution the pool holds. One whose lease did not
 * renew (cancelled, taken over) has its handler aborted, unless the pool let go of it meanwhile.
 */
export async function renewHeldLeases(slots: SlotPool, options: LeaseRenewalOptions): Promise<void> {
  const entries = slots.heldExecutions();
  if (entries.length === 0) return;
  await Promise.all(entries.map((e) => e.claimCommitted));
  const renewedAt = Date.now();
  try {
    const held = await options.backend.renewLeases(entries.map((e) => e.lease), options.leaseMs);
    for (const e of entries) {
      if (held.has(e.lease.id)) e.leaseExpiresAt = renewedAt + options.leaseMs;
      else if (slots.holds(e)) e.controller.abort(new LeaseLostError(e.lease.id));
    }
  } catch (err) {
    options.onDatabaseError();
    options.log.warn({ err: (err as Error).message }, 'lease renewal failed');
    // A lease this worker could not renew in time may already be another worker's: stop its handler
    // before it runs more steps (their records would be fenced out, but their side effects not).
    const now = Date.now();
    for (const e of entries) {
      if (e.leaseExpiresAt <= now && slots.holds(e) && e.inHandler) e.controller.abort(new LeaseLostError(e.lease.id));
    }
  }
}
