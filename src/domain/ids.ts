import { v7 as uuidv7, validate, version } from 'uuid';

/** A new execution id: UUIDv7, so ids sort by creation time and index inserts stay append-only. */
export function newExecutionId(): string {
  return uuidv7();
}

const UUID_SHAPE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for a syntactically valid UUID; checked before any SQL so junk ids never reach the database. */
export function isExecutionId(value: string): boolean {
  return UUID_SHAPE.test(value) && validate(value) && version(value) >= 1;
}
