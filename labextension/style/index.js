import './base.css';
import './assist.css';
import './plan.css';
import './usage.css';
import './acp.css';
