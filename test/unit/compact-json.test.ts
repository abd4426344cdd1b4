import { compactJsonText } from '../../src/domain/json';

describe('compactJsonText', () => {
  test('drops the whitespace between tokens and keeps every token as written', () => {
    const text = '{"b" : 1, "a": [1.50, 2e3 ,\n\t{"10": null}], "s": " spaced ,: \\" quoted \\\\"}';
    const compact = compactJsonText(text);
    expect(compact).toBe('{"b":1,"a":[1.50,2e3,{"10":null}],"s":" spaced ,: \\" quoted \\\\"}');
    expect(JSON.parse(compact)).toEqual(JSON.parse(text));
  });

  test('PostgreSQL json_build_object text comes out as JSON.stringify writes it', () => {
    expect(compactJsonText('{"type" : "x", "data" : {"n" : 1, "tags" : ["a", "b"]}}')).toBe(JSON.stringify({ type: 'x', data: { n: 1, tags: ['a', 'b'] } }));
  });
});
