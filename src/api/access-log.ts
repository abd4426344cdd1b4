import type { Logger } from '../logger';
import type { RequestObserver } from './request-observers';

/**
 * One log line per request: method, route template, status and duration under the request id.
 * Never headers, query strings or bodies, so tokens and payloads stay out of the log. The line is
 * built only when it will be written (a 5xx, or debug level on): at the default level most requests
 * log nothing, and the schedule path should not pay for a line nobody reads.
 */
export function logRequests(log: Logger): RequestObserver {
  return (request, durationMs) => {
    const failed = request.status >= 500;
    if (!failed && !log.isLevelEnabled('debug')) return;
    const fields = { requestId: request.requestId, method: request.method, route: request.route, status: request.status, durationMs: Math.round(durationMs) };
    if (failed) log.warn(fields, 'request completed');
    else log.debug(fields, 'request completed');
  };
}
