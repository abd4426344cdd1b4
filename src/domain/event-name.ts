/**
 * Checks the name of an event a task waits for. "." and ".." are refused: URLs normalise them as dot
 * segments, so no client could deliver them to POST /api/v1/events/{id}/{event_name}.
 */
export function checkEventName(name: unknown, where = 'waitForEvent'): void {
  if (typeof name !== 'string' || name.length === 0 || name.length > 200) {
    throw new TypeError(`${where}: an event name must be a non-empty string of at most 200 characters`);
  }
  if (name === '.' || name === '..') {
    throw new TypeError(`${where}: the event name ${JSON.stringify(name)} cannot be delivered (a URL reads it as a dot segment)`);
  }
}
