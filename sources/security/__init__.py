"""Who may call a source and what stays private: credentials checked (auth), bearer tokens over HTTP
(http_auth), the key pair (keys), the fleet's secret; private files and folders: traces.private_files."""
