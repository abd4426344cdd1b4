import { defineTask, Type } from 'stepwise-workflows';

/**
 * Runs by itself at 08:00 London time on weekdays: every worker serving it fires it, and each fire time
 * starts exactly one execution between them. It can also be scheduled by hand, say for a test run:
 *
 *   curl -X POST localhost:8080/api/v1/executions -H 'content-type: application/json' \
 *     -d '{"task":"weekday-digest","data":{"audience":"staff"}}'
 *   curl localhost:8080/api/v1/tasks      # "cron":{"pattern":"0 8 * * 1-5","timezone":"Europe/London","next_at":"…"}
 */
export const weekdayDigest = defineTask({
  name: 'weekday-digest',
  data: Type.Object({ audience: Type.Union([Type.Literal('staff'), Type.Literal('customers')]) }, { additionalProperties: false }),
  cron: { pattern: '0 8 * * 1-5', timezone: 'Europe/London', data: { audience: 'customers' } },
  // The (simulated) mail service takes two senders at a time, however many workers run.
  concurrency: { limit: 2 },
  async run(ctx, data) {
    const items = await ctx.step('collect', () => ['orders shipped: 12', 'approvals waiting: 3']);
    const sent = await ctx.step('send', () => ({ to: data.audience, lines: items.length, messageId: `digest-${ctx.executionId}` }));
    return sent;
  },
});
