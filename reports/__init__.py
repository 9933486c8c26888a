"""Finance reports (PDF, CSV, XLSX) over cost and forecast data."""
