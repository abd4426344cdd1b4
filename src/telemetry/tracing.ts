import type { Logger } from '../logger';
import { readTracingSettings, type Tracing } from './spans';

export type { AttemptStart, AttemptTrace, DeliveryStart, SpanTrace, TraceAttributes, TracedError, Tracing, TracingSettings } from './spans';
export { readTracingSettings } from './spans';

/**
 * Starts tracing when the process's environment asks for it (see readTracingSettings), else returns
 * null having loaded nothing: the OpenTelemetry SDK and exporter are required here, on first use,
 * never at import. The caller owns the result and calls shutdown() last, so that the spans of a stop
 * are exported.
 */
export function startTracing(options: { log: Logger }): Tracing | null {
  const settings = readTracingSettings(process.env);
  if (!settings) return null;
  if (settings.unsupportedProtocol) options.log.warn({ protocol: settings.unsupportedProtocol }, 'otlp protocol not supported; exporting traces as http/protobuf');
  // A require, not import(): the project is CommonJS, and one copy of each module must serve the SDK and @opentelemetry/api.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { createOtelTracing } = require('./otel-tracing') as typeof import('./otel-tracing');
  const tracing = createOtelTracing(settings, options.log);
  options.log.info({ serviceName: settings.serviceName, protocol: settings.protocol }, 'tracing enabled: exporting spans over otlp');
  return tracing;
}
