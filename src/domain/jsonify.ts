/**
 * The static type of a value's JSON form, what toFaithfulJson returns and every run of a step sees:
 * Dates become strings, toJSON() results replace their objects, functions, symbols and undefined
 * properties go (a property that may be undefined becomes optional), undefined array items become
 * null. What toFaithfulJson refuses (Map, Set, BigInt, typed arrays) becomes `never`.
 */
export type Jsonify<T> = IsAny<T> extends true ? any : unknown extends T ? unknown : JsonifyValue<T>;

type IsAny<T> = 0 extends 1 & T ? true : false;

/** Anything that is a function or a symbol: refused as a value and dropped as a property type. */
type Unwritable = symbol | ((...args: never[]) => unknown) | (abstract new (...args: never[]) => unknown);

/**
 * Refused at run time. Checked after toJSON, as at run time: a Buffer (a Uint8Array with toJSON) has a
 * JSON form, other typed arrays (ArrayBufferView) do not.
 */
type Refused = bigint | ReadonlyMap<unknown, unknown> | ReadonlySet<unknown> | WeakMap<object, unknown> | WeakSet<object> | ArrayBufferLike | Promise<unknown> | RegExp;

/** A JSON value's type; one already JSON is its own JSON form (and is not walked: it may be recursive). */
type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/**
 * JSON as many libraries type it, objects with undefined (absent) values included: also its own JSON
 * form, where only `?` could differ. Taken whole for arrays and index signatures, the usual places of
 * a recursive JSON type, which TypeScript could not walk.
 */
type JsonLike = string | number | boolean | null | readonly JsonLike[] | { readonly [key: string]: JsonLike | undefined };

// Distributes over unions: `Date | undefined` at the top is `string | undefined`.
type JsonifyValue<T> = T extends string | number | boolean | null | undefined
  ? T
  : T extends { toJSON(...args: never[]): infer R }
    ? JsonifyAfterToJson<R>
    : T extends Unwritable | Refused | ArrayBufferView
      ? never
      : T extends readonly unknown[]
        ? T extends readonly JsonLike[]
          ? T
          : JsonifyArray<T>
        : T extends object
          ? [Extract<keyof T, symbol>] extends [never]
            ? T extends JsonValue
              ? T
              : string extends keyof T
                ? T extends JsonLike
                  ? T
                  : JsonifyObject<T>
                : JsonifyObject<T>
            : JsonifyObject<T>
          : never;

/** JSON.stringify does not call toJSON again on what toJSON returned, but its members get theirs. */
type JsonifyAfterToJson<R> = IsAny<R> extends true ? any : unknown extends R ? unknown : R extends Date ? never : JsonifyValue<R>;

/** Element-wise; a mapped type over an array type keeps tuples as tuples and readonly arrays readonly. */
type JsonifyArray<T extends readonly unknown[]> = { [K in keyof T]: JsonifyItem<T[K]> };

type JsonifyItem<T> = IsAny<T> extends true ? any : unknown extends T ? unknown : T extends undefined | Unwritable ? null : JsonifyValue<T>;

/**
 * Each key is judged on its own value, so that the other keys of an object stay usable where one value
 * is a type parameter (TypeScript cannot tell yet whether that one is written).
 */
type WrittenKey<K, V> = K extends symbol ? never : IsAny<V> extends true ? K : [Exclude<V, undefined | Unwritable>] extends [never] ? never : K;

/** A written key may be absent from the JSON when its value may be undefined. */
type RequiredKey<K, V> = IsAny<V> extends true ? WrittenKey<K, V> : undefined extends V ? never : WrittenKey<K, V>;
type OptionalKey<K, V> = IsAny<V> extends true ? never : undefined extends V ? WrittenKey<K, V> : never;

type JsonifyProperty<V> = IsAny<V> extends true ? any : unknown extends V ? unknown : JsonifyValue<Exclude<V, undefined | Unwritable>>;

type JsonifyObject<T> = Simplify<
  { [K in keyof T as RequiredKey<K, T[K]>]-?: JsonifyProperty<T[K]> } & { [K in keyof T as OptionalKey<K, T[K]>]?: JsonifyProperty<T[K]> }
>;

type Simplify<T> = { [K in keyof T]: T[K] } & {};
