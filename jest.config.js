/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  // The cost budget runs alone after the rest (jest.budget.config.js, Makefile `test`).
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/budget/'],
  transform: { '^.+\\.(t|j)sx?$': ['@swc/jest'] },
  moduleNameMapper: {
    '^stepwise-workflows$': '<rootDir>/src/index.ts',
    '^stepwise-workflows/client$': '<rootDir>/src/client/index.ts',
    '^json-schema-faker$': '<rootDir>/node_modules/json-schema-faker/dist/index.js',
  },
  transformIgnorePatterns: ['/node_modules/(?!(json-schema-faker|@seriousme/openapi-schema-validator)/)'],
  globalSetup: '<rootDir>/test/helpers/global-setup.mjs',
  globalTeardown: '<rootDir>/test/helpers/global-teardown.mjs',
  testTimeout: 30000,
};
