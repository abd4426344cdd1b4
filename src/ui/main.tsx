/** Browser entry of the dashboard; the server puts its base path on <html data-base-path>. */
import { render } from 'preact';
import { App } from './app';

const root = document.getElementById('app');
if (root) render(<App basePath={document.documentElement.dataset.basePath ?? ''} />, root);
