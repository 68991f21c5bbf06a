/**
 * Playwright configuration for the qloop-kernel browser tests.
 *
 * Uses Debian's Chromium (no browser download) and starts, from the active
 * Python environment ($PYTHON, or `python` on PATH), the Messages API
 * stand-in on a free loopback port, then JupyterLab with its kernels pointed
 * at the stand-in.
 */
const baseConfig = require('@jupyterlab/galata/lib/playwright-config');

const port = process.env.QLOOP_UI_PORT || '8888';
const python = process.env.PYTHON || 'python';
// run.sh runs shards of the suite side by side, each with its own stand-in,
// JupyterLab (on its own port and root folder), results and server log.
const run = process.env.QLOOP_UI_RUN || '';
const suffix = run ? `-${run}` : '';
// The spend ledger of the server and its kernels, one per port (usage.spec.ts
// writes it; the test workers read the name from the environment).
process.env.QLOOP_UI_USAGE_FILE ||= require('path').join(
  require('os').tmpdir(),
  `qloop-ui-usage-${port}.jsonl`
);

/**
 * The environment JupyterLab and its kernels get on top of Playwright's: a
 * fake key, no proxy for loopback, and none of the caller's credentials or
 * proxies (an `undefined` value removes a variable).
 */
const serverEnv = {
  ANTHROPIC_API_KEY: 'test',
  ANTHROPIC_AUTH_TOKEN: undefined,
  NO_PROXY: '127.0.0.1,localhost',
  no_proxy: '127.0.0.1,localhost',
  QLOOP_USAGE_FILE: process.env.QLOOP_UI_USAGE_FILE,
  HTTP_PROXY: undefined,
  HTTPS_PROXY: undefined,
  ALL_PROXY: undefined,
  http_proxy: undefined,
  https_proxy: undefined,
  all_proxy: undefined
};

module.exports = {
  ...baseConfig,
  testDir: './tests',
  outputDir: run ? `./test-results/${run}` : './test-results',
  reporter: [
    ['list'],
    [
      'html',
      {
        open: 'never',
        outputFolder: run ? `playwright-report/${run}` : 'playwright-report'
      }
    ]
  ],
  // Within one run, one test at a time against its JupyterLab server (the
  // stand-in serves one script at a time); run.sh runs shards side by side.
  // fullyParallel lets --shard split the suite by test rather than by file,
  // so the shards take about as long as each other (no spec shares state
  // between its tests: none has a beforeAll or a serial describe).
  workers: 1,
  fullyParallel: true,
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
  // Started in this order. The stand-in prints its base URL on its first
  // line; Playwright puts it in QLOOP_STANDIN_URL, which the JupyterLab
  // command and the test workers read.
  webServer: [
    {
      name: 'stand-in',
      command: `"${python}" -m qloop_kernel.testing --port 0`,
      wait: { stdout: /^(?<qloop_standin_url>http:\/\/127\.0\.0\.1:\d+)$/m },
      timeout: 30000,
      stdout: 'ignore',
      stderr: 'pipe'
    },
    {
      name: 'jupyterlab',
      // The server's log goes to jupyter-server.log (jupyter-server-RUN.log
      // for a shard), not into the test report.
      // Real-time collaboration (jupyter-collaboration, in the test extra) is
      // off here: these specs use the notebook as JupyterLab alone has it;
      // playwright.rtc.config.js runs tests-rtc/ with it on.
      command:
        'ANTHROPIC_BASE_URL="${QLOOP_STANDIN_URL:?the stand-in did not start}" ' +
        `"${python}" -m jupyter lab --config jupyter_server_test_config.py ` +
        `--YDocExtension.disable_rtc=True > jupyter-server${suffix}.log 2>&1`,
      env: serverEnv,
      url: `http://127.0.0.1:${port}/lab`,
      timeout: 120000,
      reuseExistingServer: false,
      stdout: 'ignore',
      stderr: 'ignore'
    }
  ]
};
