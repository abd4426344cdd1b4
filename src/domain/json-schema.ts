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

/**
 * Compiled validators by the schema's JSON text, so that re-reading an unchanged schema compiles
 * nothing; at most `max` are kept, the oldest dropped first. A schema that fails to compile throws
 * and drops nothing.
 */
export class SchemaValidators {
  private readonly byText = new Map<string, ValidateFunction>();

  constructor(private readonly max = 1000) {}

  /** The validator of the schema whose JSON is `text`; `schema` is that schema, parsed from it by default. */
  get(text: string, schema: () => unknown = () => JSON.parse(text)): ValidateFunction {
    let validate = this.byText.get(text);
    if (!validate) {
      validate = compileJsonSchema(schema() as object);
      if (this.byText.size >= this.max) this.byText.delete(this.byText.keys().next().value as string);
      this.byText.set(text, validate);
    }
    return validate;
  }
}
