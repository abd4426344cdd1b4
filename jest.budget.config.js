// The cost budget (test/budget): alone and in band, after the main suite (Makefile `test`): what it
// counts is its own database's, but its idle window and the worker's timers count wall time, which
// a machine busy with parallel test files stretches.
// One project: the root's own options, without the projects of the main suite.
const { projects: _projects, displayName: _name, ...base } = require('./jest.config.js');

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/budget/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/'],
  testTimeout: 180000,
};
