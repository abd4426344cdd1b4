// Two projects: every test file with its workers on the database (direct), and the engine's semantic
// suites again with their workers remote, talking to an API server over the worker protocol with no
// database access (test/helpers/worker.ts reads STEPWISE_TEST_WORKER_MODE from the globals).
const shared = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  transform: { '^.+\\.(t|j)sx?$': ['@swc/jest'] },
  moduleNameMapper: {
    '^stepwise-workflows$': '<rootDir>/src/index.ts',
    '^stepwise-workflows/client$': '<rootDir>/src/client/index.ts',
    '^json-schema-faker$': '<rootDir>/node_modules/json-schema-faker/dist/index.js',
  },
  transformIgnorePatterns: ['/node_modules/(?!(json-schema-faker|@seriousme/openapi-schema-validator)/)'],
  globalSetup: '<rootDir>/test/helpers/global-setup.mjs',
  globalTeardown: '<rootDir>/test/helpers/global-teardown.mjs',
};

/** The suites of the engine's durable semantics, run a second time with remote workers. */
const REMOTE_SUITES = [
  'durable-semantics',
  'durable-semantics-2',
  'durable-races',
  'engine-steps',
  'child-executions',
  'task-versions',
  'flow-control',
  'sleep-wake',
];

const direct = {
  ...shared,
  displayName: 'direct',
  testMatch: ['**/*.test.ts'],
  // The cost budget runs alone after the rest (jest.budget.config.js, Makefile `test`).
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/budget/'],
};

const remote = {
  ...shared,
  displayName: 'remote',
  testMatch: REMOTE_SUITES.map((name) => `<rootDir>/test/integration/${name}.test.ts`),
  globals: { STEPWISE_TEST_WORKER_MODE: 'remote' },
};

/** @type {import('jest').Config} */
module.exports = {
  ...direct,
  testTimeout: 30000,
  projects: [direct, remote],
};
