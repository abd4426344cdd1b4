import pino, { type Logger } from 'pino';

export type { Logger };

/**
 * Structured logs: JSON in production, pretty-printed when stdout is a terminal. Never log
 * payloads or tokens; the redaction below is a safety net, not the policy.
 */
export function createLogger(options: { level?: string; pretty?: boolean; destination?: pino.DestinationStream } = {}): Logger {
  const pretty = options.pretty ?? (process.stdout.isTTY === true && !options.destination);
  const base: pino.LoggerOptions = {
    level: options.level ?? 'info',
    base: { service: 'stepwise' },
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', 'authorization', 'token', 'tokens', '*.token'],
      censor: '[redacted]',
    },
  };
  if (options.destination) return pino(base, options.destination);
  if (pretty) {
    return pino({ ...base, transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname,service' } } });
  }
  return pino(base);
}
