import { executionTraceParent, formatTraceparent, parseTraceparent } from '../../src/domain/traceparent';
import { readTracingSettings } from '../../src/telemetry/tracing';

const VALID = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe('parseTraceparent', () => {
  test('reads a version-00 traceparent and its sampled flag', () => {
    expect(parseTraceparent(VALID)).toEqual({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', sampled: true });
    expect(parseTraceparent(VALID.replace(/01$/, '00'))?.sampled).toBe(false);
    expect(formatTraceparent(parseTraceparent(VALID)!)).toBe(VALID);
  });

  test.each([
    ['empty', ''],
    ['upper case', VALID.toUpperCase()],
    ['another version', VALID.replace(/^00/, '01')],
    ['the forbidden version ff', VALID.replace(/^00/, 'ff')],
    ['a zero trace id', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`],
    ['a zero span id', `00-4bf92f3577b34da6a3ce929d0e0e4736-${'0'.repeat(16)}-01`],
    ['a trailing field', `${VALID}-extra`],
    ['two headers joined', `${VALID}, ${VALID}`],
    ['a short span id', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902-01'],
  ])('refuses %s', (_what, text) => {
    expect(parseTraceparent(text)).toBeUndefined();
  });

  test('the trace of an execution without a parent is named by its id', () => {
    expect(executionTraceParent('0190f5a4-7c3e-7a1b-9d2e-3f4a5b6c7d8e')).toEqual({ traceId: '0190f5a47c3e7a1b9d2e3f4a5b6c7d8e', spanId: '9d2e3f4a5b6c7d8e', sampled: true });
  });
});

describe('readTracingSettings', () => {
  test('off without an OTLP endpoint, or when the SDK or trace export is disabled', () => {
    expect(readTracingSettings({})).toBeUndefined();
    expect(readTracingSettings({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toBeUndefined();
    expect(readTracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'TRUE' })).toBeUndefined();
    expect(readTracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
  });

  test('on with an endpoint for all signals or for traces; protobuf and the service name stepwise by default', () => {
    expect(readTracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toEqual({ serviceName: 'stepwise', protocol: 'http/protobuf' });
    expect(readTracingSettings({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c/v1/traces', OTEL_SERVICE_NAME: 'billing', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toEqual({ serviceName: 'billing', protocol: 'http/json' });
    expect(readTracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' })?.protocol).toBe('http/protobuf');
    expect(readTracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toEqual({ serviceName: 'stepwise', protocol: 'http/protobuf', unsupportedProtocol: 'grpc' });
  });
});
