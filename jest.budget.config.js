// The cost budget (test/budget): alone and in band, after the main suite (Makefile `test`), because
// the WAL it counts is the whole server's and parallel test files would write into it.
const base = require('./jest.config.js');

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/budget/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/'],
  testTimeout: 180000,
};
