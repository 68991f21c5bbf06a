import './base.css';
import './plan.css';
import './usage.css';
