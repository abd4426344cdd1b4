// The jest matcher `expect(response).toMatchSpec(operationId?)`, over the same Ajv validators the
// server is compiled from (see spec-check.ts, which has no jest dependency and also serves scripts).
import { findSpecViolations, type RecordedResponse } from './spec-check';

export { findSpecViolations, recordResponse, SpecViolationError, type RecordedResponse } from './spec-check';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace jest {
    interface Matchers<R> {
      /** The response is one openapi.yaml lists (for `operationId`, or the operation its method and path match). */
      toMatchSpec(operationId?: string): R;
    }
  }
}

// Outside jest (scripts/fuzz.ts reuses these checks) there is no `expect` to extend.
if (typeof expect !== 'undefined') expect.extend({
  toMatchSpec(received: RecordedResponse, operationId?: string) {
    const problems = findSpecViolations(received, operationId);
    return {
      pass: problems.length === 0,
      message: () =>
        problems.length === 0
          ? `expected ${received.method} ${received.path} → ${received.status} not to match the spec`
          : `${received.method} ${received.path} → ${received.status} breaks the spec:\n  ${problems.join('\n  ')}`,
    };
  },
});
