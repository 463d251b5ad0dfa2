import './index.test'
