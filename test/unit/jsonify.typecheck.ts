// Compile-time test (checked by `tsc --noEmit`, not run by jest): Jsonify<T> is the type of T's JSON
// form, what a step returns on every run. Each Assert fails to compile when the two types differ; the
// line after each @ts-expect-error must fail to compile, and tsc reports the directive if it does not.
import type { Jsonify } from '../../src/domain/jsonify';
import { toFaithfulJson } from '../../src/domain/json';

/** True only when A and B are the same type (readonly and optional modifiers included). */
type Equal<A, B> = (<G>() => G extends A ? 1 : 2) extends <G>() => G extends B ? 1 : 2 ? true : false;
type Assert<T extends true> = T;

class Money {
  constructor(
    readonly amount: number,
    readonly currency: string,
  ) {}
  format(): string {
    return `${this.amount} ${this.currency}`;
  }
}

class Temperature {
  constructor(private readonly celsius: number) {}
  toJSON(): { celsius: number; at: Date } {
    return { celsius: this.celsius, at: new Date() };
  }
}

interface Tree {
  label: string;
  children: Tree[];
}

export type Cases = [
  // A Date is its ISO string, at the top, in objects and in arrays.
  Assert<Equal<Jsonify<Date>, string>>,
  Assert<Equal<Jsonify<{ at: Date }>, { at: string }>>,
  Assert<Equal<Jsonify<Date[]>, string[]>>,
  // Primitives (and their literal types) stay; undefined stays undefined at the top only.
  Assert<Equal<Jsonify<'a' | 1 | true | null>, 'a' | 1 | true | null>>,
  Assert<Equal<Jsonify<string | undefined>, string | undefined>>,
  // Functions and symbols go; a property that may be undefined becomes optional; undefined-only goes.
  Assert<Equal<Jsonify<{ n: number; f: () => void }>, { n: number }>>,
  Assert<Equal<Jsonify<{ n: number; s: symbol; u: undefined }>, { n: number }>>,
  Assert<Equal<Jsonify<{ a?: string; b: number | undefined }>, { a?: string; b?: number }>>,
  Assert<Equal<Jsonify<{ [key: symbol]: number; k: string }>, { k: string }>>,
  // toJSON's result, made JSON in turn; a class instance is its data, without methods or private fields.
  Assert<Equal<Jsonify<{ t: Temperature }>, { t: { celsius: number; at: string } }>>,
  Assert<Equal<Jsonify<Money>, { readonly amount: number; readonly currency: string }>>,
  Assert<Equal<Jsonify<Buffer>, { type: 'Buffer'; data: number[] }>>,
  // Arrays element-wise; undefined and function items become null; tuples and readonly stay.
  Assert<Equal<Jsonify<Array<number | undefined>>, Array<number | null>>>,
  Assert<Equal<Jsonify<[Date, () => void, string?]>, [string, null, (string | null)?]>>,
  Assert<Equal<Jsonify<readonly { at: Date }[]>, readonly { at: string }[]>>,
  Assert<Equal<Jsonify<{ readonly list: readonly [1, 2] }>, { readonly list: readonly [1, 2] }>>,
  // Refused at run time: never.
  Assert<Equal<Jsonify<Map<string, number>>, never>>,
  Assert<Equal<Jsonify<Set<string>>, never>>,
  Assert<Equal<Jsonify<bigint>, never>>,
  Assert<Equal<Jsonify<Uint8Array>, never>>,
  Assert<Equal<Jsonify<() => void>, never>>,
  Assert<Equal<Jsonify<{ m: Map<string, number> }>, { m: never }>>,
  // Index signatures, recursion, unknown and any.
  Assert<Equal<Jsonify<Record<string, Date>>, Record<string, string>>>,
  Assert<Equal<Jsonify<Tree>['children'][number]['children'][number]['label'], string>>,
  Assert<Equal<Jsonify<unknown>, unknown>>,
  Assert<Equal<Jsonify<{ u: unknown }>, { u?: unknown }>>,
  Assert<Equal<Jsonify<any>, any>>,
  Assert<Equal<Jsonify<{ a: any }>, { a: any }>>,
];

// toFaithfulJson returns the JSON form's type.
export const stored = toFaithfulJson({ at: new Date(), f: () => 1, n: 1 }, 'v');
export const at: string = stored.at;
// @ts-expect-error the Date is a string after the round trip
export const when: Date = stored.at;
// @ts-expect-error functions do not survive JSON
void stored.f;
// @ts-expect-error a Map is refused, so no value has this type
export const map: Jsonify<Map<string, number>> = {};
// @ts-expect-error an optional property's value may be absent
export const label: string = toFaithfulJson({ label: 'x' as string | undefined }, 'v').label;

// Values already JSON go through unchanged, without "excessively deep" recursion.
type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
// As fast-check and Prisma type JSON: object values may be absent.
type LooseJson = boolean | number | string | null | LooseJson[] | { [key in string]?: LooseJson };
export type JsonCases = [
  Assert<Equal<Jsonify<JsonValue>, JsonValue>>,
  Assert<Equal<Jsonify<LooseJson>, LooseJson>>,
  Assert<Equal<Jsonify<{ rows: LooseJson[]; at: Date }>, { rows: LooseJson[]; at: string }>>,
  Assert<Equal<Jsonify<{ payload: Record<string, any> }>, { payload: Record<string, any> }>>,
];

// In generic code, the keys whose values are known stay usable; a key whose value is a type
// parameter is only known once the parameter is.
export function unwrap<T>(recorded: Jsonify<{ value: T; run: string }>): string {
  return recorded.run;
}
