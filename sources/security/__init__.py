"""Who may call a source and what stays private: credentials checked (auth), bearer tokens over HTTP
(http_auth), the key pair (keys), private files and folders (private_files), the fleet's secret."""
