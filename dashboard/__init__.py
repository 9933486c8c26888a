"""Plotly Dash app factory, pages and pure figure builders."""
