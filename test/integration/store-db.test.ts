import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { preparedRows, preparedRowsBeforeCommit, queryRows } from '../../src/store/db';

// One connection: a statement that left its connection waiting for a Sync would hang the next one.
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ poolMax: 1 });
  await t.db.raw(`
    CREATE TABLE early (id int PRIMARY KEY, v int);
    CREATE TABLE early_check (id int PRIMARY KEY REFERENCES early (id) DEFERRABLE INITIALLY DEFERRED);
  `);
});
afterAll(async () => {
  await t.drop();
});

describe('preparedRowsBeforeCommit', () => {
  test('gives the rows, then commits; the rows are visible once the commit settles', async () => {
    const { rows, commit } = await preparedRowsBeforeCommit<{ id: number }>(t.db, 'early_insert', 'INSERT INTO early (id, v) VALUES ($1, 1), ($2, 2) RETURNING id', [1, 2]);
    expect(rows.map((r) => r.id)).toEqual([1, 2]);
    await commit;
    expect(await queryRows(t.db, 'SELECT id FROM early ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }]);
  });

  test('a statement that fails rejects, and its connection serves the next query', async () => {
    await expect(preparedRowsBeforeCommit(t.db, 'early_div', 'SELECT 1 / ($1::int - 1) AS x', [1])).rejects.toThrow(/division by zero/);
    expect(await queryRows(t.db, 'SELECT 7 AS x')).toEqual([{ x: 7 }]);
  });

  test('a commit that fails rejects `commit` after the rows came, writes nothing, and frees the connection', async () => {
    const { rows, commit } = await preparedRowsBeforeCommit<{ id: number }>(
      t.db,
      'early_deferred',
      'WITH a AS (INSERT INTO early (id, v) VALUES ($1, 0) RETURNING id) INSERT INTO early_check (id) VALUES ($2) RETURNING id',
      [10, 11],
    );
    expect(rows).toEqual([{ id: 11 }]);
    await expect(commit).rejects.toThrow(/foreign key/);
    expect(await queryRows(t.db, 'SELECT id FROM early WHERE id = 10')).toEqual([]);
  });
});

describe('preparedRows', () => {
  test('a prepared statement reading `*` still answers after a migration adds a column to its table', async () => {
    await t.db.raw('CREATE TABLE grows (id int PRIMARY KEY); INSERT INTO grows VALUES (1)');
    expect(await preparedRows(t.db, 'grows_all', 'SELECT * FROM grows WHERE id = $1', [1])).toEqual([{ id: 1 }]);
    // Same (only) connection: the statement stays prepared with the old columns.
    await t.db.raw('ALTER TABLE grows ADD COLUMN note text');
    expect(await preparedRows(t.db, 'grows_all', 'SELECT * FROM grows WHERE id = $1', [1])).toEqual([{ id: 1, note: null }]);
    expect(await preparedRows(t.db, 'grows_all', 'SELECT * FROM grows WHERE id = $1', [1])).toEqual([{ id: 1, note: null }]);
  });
});

describe('preparedRows', () => {
  test('a prepared statement whose result columns a migration changed is prepared again, not failed', async () => {
    await t.db.raw('CREATE TABLE widened (a int); INSERT INTO widened VALUES (1)');
    expect(await preparedRows(t.db, 'widened_all', 'SELECT * FROM widened', [])).toEqual([{ a: 1 }]);
    await t.db.raw('ALTER TABLE widened ADD COLUMN b int DEFAULT 2');
    expect(await preparedRows(t.db, 'widened_all', 'SELECT * FROM widened', [])).toEqual([{ a: 1, b: 2 }]);
  });
});
