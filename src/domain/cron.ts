import { Cron } from 'croner';

/** When a task runs on its own: a cron pattern, with an optional time zone and the data each run gets. */
export interface CronTrigger<D = unknown> {
  /**
   * Five fields (minute hour day-of-month month day-of-week) or six with seconds first, as in
   * `0 9 * * 1-5` or `30 0 9 * * 1-5`; also `@hourly`, `@daily` and the like.
   */
  pattern: string;
  /** An IANA time zone such as `Europe/Paris`, in which the pattern's hours are read. Default UTC. */
  timezone?: string;
  /** The `data` of every execution it starts (checked against the task's schema). Default null. */
  data?: D;
}

/** A trigger checked and normalized: what workers record in the tasks table and fire from. */
export interface CronSchedule {
  pattern: string;
  timezone: string;
  data: unknown;
}

/** Checks a task's `cron` option; throws a TypeError naming the task and what is wrong. */
export function parseCronTrigger(task: string, trigger: string | CronTrigger): CronSchedule {
  const options = typeof trigger === 'string' ? { pattern: trigger } : trigger;
  if (typeof options !== 'object' || options === null || typeof options.pattern !== 'string') {
    throw new TypeError(`task ${task}: cron must be a pattern string or { pattern, timezone?, data? }`);
  }
  const timezone = options.timezone ?? 'UTC';
  try {
    // Throws RangeError for a zone Intl does not know; croner would only fail at its first use.
    new Intl.DateTimeFormat('en', { timeZone: timezone });
  } catch {
    throw new TypeError(`task ${task}: cron time zone ${JSON.stringify(timezone)} is not an IANA time zone`);
  }
  try {
    new Cron(options.pattern, { timezone, paused: true });
  } catch (err) {
    throw new TypeError(`task ${task}: cron pattern ${JSON.stringify(options.pattern)} is invalid: ${(err as Error).message}`);
  }
  return { pattern: options.pattern, timezone, data: options.data ?? null };
}

/** The first fire time strictly after `after`, or null when the pattern has no more (a past date). */
export function nextFireAfter(schedule: Pick<CronSchedule, 'pattern' | 'timezone'>, after: Date): Date | null {
  return new Cron(schedule.pattern, { timezone: schedule.timezone, paused: true }).nextRun(after);
}
