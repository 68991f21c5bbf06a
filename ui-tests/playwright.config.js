/**
 * Playwright configuration for the qloop-kernel browser tests.
 *
 * Uses Debian's Chromium (no browser download) and starts JupyterLab from
 * the active Python environment ($PYTHON, or `python` on PATH).
 */
const baseConfig = require('@jupyterlab/galata/lib/playwright-config');

const port = process.env.QLOOP_UI_PORT || '8888';
const python = process.env.PYTHON || 'python';

module.exports = {
  ...baseConfig,
  testDir: './tests',
  outputDir: './test-results',
  reporter: [['list'], ['html', { open: 'never' }]],
  // One JupyterLab server on two cores: tests run one at a time.
  workers: 1,
  fullyParallel: false,
  retries: 0,
  timeout: 90000,
  expect: { timeout: 15000 },
  use: {
    ...baseConfig.use,
    baseURL: `http://127.0.0.1:${port}`,
    trace: 'off',
    video: 'off',
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-dev-shm-usage',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run'
      ]
    }
  },
  webServer: {
    // The server's log goes to jupyter-server.log, not into the test report.
    command: `"${python}" -m jupyter lab --config jupyter_server_test_config.py > jupyter-server.log 2>&1`,
    url: `http://127.0.0.1:${port}/lab`,
    timeout: 120000,
    reuseExistingServer: false,
    stdout: 'ignore',
    stderr: 'ignore'
  }
};
