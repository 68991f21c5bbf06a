/**
 * Playwright configuration for the browser tests under real-time
 * collaboration (tests-rtc/): playwright.config.js with
 * jupyter-collaboration's shared documents on.
 *
 * The same stand-in and JupyterLab server, without
 * `--YDocExtension.disable_rtc=True`: every page edits the server's shared
 * copy of a notebook, and the server saves it to disk. ui-tests/run.sh runs
 * it after the main suite (`run.sh --rtc ARGS...` alone).
 */
const main = require('./playwright.config.js');

const [standIn, lab] = main.webServer;
const RTC_OFF = ' --YDocExtension.disable_rtc=True';
if (!lab.command.includes(RTC_OFF)) {
  throw new Error('playwright.config.js no longer turns collaboration off');
}

module.exports = {
  ...main,
  testDir: './tests-rtc',
  // Inside the main suite's folders (git ignores them), apart from its files.
  outputDir: './test-results/rtc',
  reporter: [
    ['list'],
    ['html', { open: 'never', outputFolder: 'playwright-report/rtc' }]
  ],
  webServer: [
    standIn,
    {
      ...lab,
      // The shared documents' history goes to the run's temporary root
      // folder (by default .jupyter_ystore.db in the working directory).
      command:
        'mkdir -p test-results && ' +
        lab.command
          .replace(
            RTC_OFF,
            ' --SQLiteYStore.db_path="${JUPYTERLAB_GALATA_ROOT_DIR:?run ui-tests/run.sh --rtc}/.jupyter_ystore.db"'
          )
          .replace(
            /> jupyter-server[^ ]*\.log/,
            '> test-results/jupyter-server-rtc.log'
          )
    }
  ]
};
