/**
 * When a failed delivery is tried again: after the base delay (5 s by default, `webhooks.retryBaseMs`),
 * then 6, 24, 120, 360, 720, 1440 and 2880 times it (30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h), then
 * every 4320 times it (6 h), each ±20 % so deliveries that failed together (a receiver that was down)
 * do not all come back at once. The statement that records the attempt caps the delay at the end of
 * the retry period (`webhooks.retryForMs`, 24 h), when the last attempt is made.
 */
const MULTIPLIERS = [1, 6, 24, 120, 360, 720, 1440, 2880, 4320] as const;

/** The delay before the next attempt, after `attemptsMade` attempts (at least one) failed. */
export function retryDelayMs(attemptsMade: number, baseMs: number, random: () => number = Math.random): number {
  const multiplier = MULTIPLIERS[Math.min(Math.max(1, attemptsMade), MULTIPLIERS.length) - 1];
  return Math.round(baseMs * multiplier * (0.8 + 0.4 * random()));
}
