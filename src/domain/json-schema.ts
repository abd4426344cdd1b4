import type { ErrorObject } from 'ajv';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';

/**
 * Compiles a task's JSON Schema (TypeBox output, or any draft 2020-12 schema) with the standard
 * formats. One Ajv per schema: tasks' schemas may reuse an `$id`, which a shared Ajv would refuse.
 */
export function compileJsonSchema(schema: object): ValidateFunction {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  return ajv.compile(schema);
}

/** A validator's errors in one line, for exceptions thrown at a task's author: `/n must be integer; …`. */
export function describeSchemaErrors(errors: readonly ErrorObject[] | null | undefined): string {
  return (errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
}
