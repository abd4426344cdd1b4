import { checkJson, sampleFromSchema, skeletonFromSchema } from '../../src/ui/json-input';

const approval = {
  type: 'object',
  required: ['approved'],
  properties: { approved: { type: 'boolean' }, note: { type: 'string', maxLength: 3 } },
  additionalProperties: false,
};

describe('checkJson', () => {
  it('accepts a value that matches the schema, and anything when there is no schema', () => {
    expect(checkJson('{"approved": true}', approval)).toEqual({ ok: true, value: { approved: true } });
    expect(checkJson('[1, "x"]', null)).toEqual({ ok: true, value: [1, 'x'] });
  });

  it('reports malformed JSON and an empty editor', () => {
    const bad = checkJson('{"approved": tru', approval);
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.problems[0].message).toMatch(/^Not valid JSON/);
    expect(checkJson('   ', null)).toMatchObject({ ok: false, problems: [{ path: '' }] });
  });

  it('lists each failing property by its pointer, without the "property does not match" wrappers', () => {
    const result = checkJson('{"approved": "yes", "note": "too long"}', approval);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems.map((p) => p.path)).toEqual(['/approved', '/note']);
    expect(result.problems[0].message).toMatch(/boolean/);
  });

  it('reports a missing required property and an unknown one', () => {
    const result = checkJson('{"approve": true}', approval);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const text = result.problems.map((p) => p.message).join(' | ');
    expect(text).toMatch(/approved/);
    expect(text).toMatch(/approve"/);
  });
});

describe('sampleFromSchema', () => {
  it('fills required properties with placeholders of their type, defaults and enums', () => {
    const schema = {
      type: 'object',
      required: ['id', 'count', 'mode', 'tags', 'flag'],
      properties: {
        id: { type: 'string' },
        count: { type: 'integer', minimum: 1 },
        mode: { enum: ['fast', 'slow'] },
        tags: { type: 'array' },
        flag: { type: 'boolean', default: true },
        optional: { type: 'string' },
      },
    };
    expect(sampleFromSchema(schema)).toEqual({ id: '', count: 1, mode: 'fast', tags: [], flag: true });
    expect(sampleFromSchema(null)).toBeNull();
  });
});

describe('skeletonFromSchema', () => {
  it('names each property and the type it takes, optional ones marked, and is no JSON that could be sent as is', () => {
    const text = skeletonFromSchema(approval);
    expect(text).toBe('{\n  "approved": <boolean>,\n  "note": <string> (optional)\n}');
    expect(checkJson(text, approval).ok).toBe(false);
  });

  it('shows enums, minimums, arrays and nested objects, and any JSON without a schema', () => {
    const schema = {
      type: 'object',
      required: ['mode', 'count', 'address'],
      properties: {
        mode: { enum: ['fast', 'slow'] },
        count: { type: 'integer', minimum: 1 },
        ids: { type: 'array', items: { type: 'string' } },
        address: { type: 'object', required: ['city'], properties: { city: { type: 'string' } } },
      },
    };
    expect(skeletonFromSchema(schema)).toBe(
      '{\n  "mode": <"fast" | "slow">,\n  "count": <integer ≥ 1>,\n  "ids": [<string>, …] (optional),\n  "address": {\n    "city": <string>\n  }\n}',
    );
    expect(skeletonFromSchema(undefined)).toBe('<any JSON value>');
    expect(skeletonFromSchema({ type: 'null' })).toBe('<null>');
  });
});
